"""Token budgets and alignment: how many tokens a text takes (``count``),
and where each token starts in it (``encode_with_offsets``). Methods of
:class:`bpe.Tokenizer`; the work is in Rust (``rust/encode/extra.rs``).

Offsets come from the ids themselves: the tokens of an encoding, laid end
to end, are the text's bytes, so token ``i`` starts at the sum of the
lengths of the tokens before it. In characters, a token that starts inside
a character (a piece of its bytes, as byte-level BPE makes of rare
characters such as some emoji) gets the index of the character it starts
in: the slice ``text[offsets[i]:]`` then begins with the whole character.
(HuggingFace's tokenizers map such a piece to its character the same way.)
"""

from __future__ import annotations

from typing import Collection, Literal

from bpe.sources.corpus import replace_surrogates

_UNITS = ("chars", "bytes")


class Measuring:
    """Mixed into :class:`bpe.Tokenizer`."""

    def count(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> int:
        """``len(self.encode(text, ...))``, without making the list: each
        chunk is looked up or merged and counted, and no id is kept. The
        special-token arguments are :meth:`encode`'s, with its errors."""
        allowed = self._policy(text, allowed_special, disallowed_special)
        try:
            return self._core.count(text, allowed)
        except UnicodeEncodeError:
            return self._core.count(replace_surrogates(text), allowed)

    def encode_with_offsets(
        self,
        text: str,
        *,
        unit: Literal["chars", "bytes"] = "chars",
        numpy: bool = False,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple:
        """``(ids, offsets)``: :meth:`encode`'s ids, and where each token
        starts in ``text``: an index into the str (``unit="chars"``, the
        default) or into its UTF-8 bytes (``unit="bytes"``). A token that
        starts inside a character gets that character's index (so several
        tokens may share an offset; offsets never decrease). A lone
        surrogate counts as the one character U+FFFD it is encoded as.

        Lists, or with ``numpy=True`` arrays (``uint32`` ids, ``int64``
        offsets; needs numpy)."""
        if unit not in _UNITS:
            raise ValueError(f"unit must be 'chars' or 'bytes', not {unit!r}")
        if not isinstance(numpy, bool):
            raise TypeError(f"numpy must be True or False, not {numpy!r}")
        if numpy:
            try:
                import numpy as np
            except ImportError:
                raise ImportError("encode_with_offsets(numpy=True) needs numpy: pip install numpy "
                                  "(or leave numpy=False for lists)") from None
        allowed = self._policy(text, allowed_special, disallowed_special)
        chars = unit == "chars"
        try:
            ids, raw = self._core.encode_with_offsets(text, allowed, chars, numpy)
        except UnicodeEncodeError:
            ids, raw = self._core.encode_with_offsets(replace_surrogates(text), allowed, chars, numpy)
        if numpy:
            return np.frombuffer(ids, dtype="<u4"), np.frombuffer(raw, dtype="<u8").astype(np.int64)
        return ids, memoryview(raw).cast("Q").tolist()

    def _policy(self, text, allowed_special, disallowed_special) -> list[str]:
        """Checks ``text`` and the special-token arguments as :meth:`encode`
        does (raising its errors); the allowed special tokens."""
        if not isinstance(text, str):
            hint = "; decode it first (e.g. text.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
            raise TypeError(f"text must be a str, not {type(text).__name__}{hint}")
        allowed = self._allowed(allowed_special)
        self._check_disallowed(text, allowed, disallowed_special)
        return list(allowed)
