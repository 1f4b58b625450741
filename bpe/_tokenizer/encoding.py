"""Encoding text: the methods of :class:`bpe.Tokenizer` that turn text into
ids, with tiktoken's special-token policy (allowed, disallowed, or text).
The work is in Rust (``rust/encode/``); this file checks arguments and
picks the core's entry point."""

from __future__ import annotations

import reprlib
from typing import Collection, Literal, Sequence

from bpe._tokenizer.bulk import _texts, _threads, _check_texts
from bpe._util.specials import disallowed_error
from bpe.sources.corpus import replace_surrogates

__all__ = ["Encoders", "check_text"]


class Encoders:
    """Mixed into :class:`bpe.Tokenizer`."""

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes text, treating special-token text as ordinary text (the list
        is untracked by the cyclic garbage collector: see ``encode``)."""
        try:
            return self._core.encode_ordinary(text)
        except UnicodeEncodeError:
            return self._core.encode_ordinary(replace_surrogates(text))
        except TypeError:
            check_text(text)  # names the argument, not the binding's conversion
            raise

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        num_threads: int | None = 1,
        dropout: float = 0.0,
        seed: int | None = None,
    ) -> list[int]:
        """Encodes text, with tiktoken's special-token semantics.

        Special tokens in ``allowed_special`` become their ids. Text matching a
        special token in ``disallowed_special`` (default: every special token
        not allowed) raises ``ValueError``: such text in training data is
        usually a mistake. Special tokens in neither set are encoded as text.

        The list of ids (of every ``encode*`` method) is hidden from Python's
        cyclic garbage collector (``gc.is_tracked(ids)`` is False): a list of
        ints can be part of no cycle, and a caller that keeps its results
        would otherwise have the collector read every id again at each
        collection. It is freed by reference counting as usual; only a cycle
        you build *through* it (by putting into it an object that refers back
        to it) is never collected. ``list(ids)`` gives an ordinary copy.

        ``num_threads`` (default 1; None: all cores) shares a large text
        (megabytes) out to threads, cut at points that change no id.

        ``dropout`` (in [0, 1)): BPE-dropout, each merge skipped with this
        chance (bpe/_tokenizer/dropout.py); reproducible with ``seed`` (an int; None: a
        random one). 0 is plain encoding.
        """
        if dropout:
            return self._encode_dropout(text, allowed_special, disallowed_special, dropout, seed, num_threads)
        if num_threads != 1:  # (1.0 and True equal 1 too: one thread, as asked)
            return self._encode_parallel(text, allowed_special, disallowed_special, num_threads, None)
        if disallowed_special == "all" and not allowed_special:
            # The default policy, in one call into Rust: short strings are
            # where per-call overhead shows, and most calls use the default.
            # (So text is checked only when the core refuses it.)
            try:
                ids = self._core.encode_unless_special(text)
            except UnicodeEncodeError:
                ids = self._core.encode_unless_special(replace_surrogates(text))
            except TypeError:
                check_text(text)
                raise
            if type(ids) is str:
                raise disallowed_error(ids)
            return ids
        check_text(text)
        return self._encode_checked(self._core.encode, text, allowed_special, disallowed_special)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        num_threads: int | None = 1,
    ):
        """:meth:`encode`, returning a ``numpy.uint32`` array instead of a
        list: no Python int is made per token, which makes large texts
        faster to encode and 7 times smaller to hold (4 bytes per id instead
        of a list slot and an int object). Needs numpy. ``num_threads`` as
        for :meth:`encode`."""
        try:
            import numpy as np
        except ImportError:
            raise ImportError(
                "encode_to_numpy needs numpy: pip install numpy (or use encode(), which returns a list)"
            ) from None
        if num_threads != 1:
            return np.frombuffer(self._encode_parallel(text, allowed_special, disallowed_special, num_threads, 4),
                                 dtype="<u4")
        check_text(text)
        raw = self._encode_checked(self._core.encode_u32, text, allowed_special, disallowed_special)
        # A buffer over the ids the core wrote (no copy); the array keeps it alive.
        return np.frombuffer(raw, dtype="<u4")

    def _encode_checked(self, core_encode, text: str, allowed_special, disallowed_special):
        """``core_encode(text, allowed, disallowed)``: the core searches for
        the disallowed special tokens and encodes in one call, with one UTF-8
        of ``text``; it returns the token found (a str) instead of ids."""
        allowed = self._allowed(allowed_special)
        disallowed = sorted(self._disallowed(allowed, disallowed_special))
        try:
            out = core_encode(text, list(allowed), disallowed)
        except UnicodeEncodeError:
            out = core_encode(replace_surrogates(text), list(allowed), disallowed)
        if type(out) is str:
            raise disallowed_error(out)
        return out

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int | None = None,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encodes many texts in parallel (``num_threads``: default all cores).
        The lists are untracked by the cyclic garbage collector (see ``encode``)."""
        texts = _texts(texts, "encode_batch", "encode")
        allowed = self._allowed(allowed_special)
        disallowed = sorted(self._disallowed(allowed, disallowed_special))
        threads = _threads(num_threads)
        try:
            out = self._core.encode_batch(texts, list(allowed), disallowed, threads)
        except UnicodeEncodeError:
            texts = [replace_surrogates(t) for t in texts]
            out = self._core.encode_batch(texts, list(allowed), disallowed, threads)
        except TypeError:
            _check_texts(texts)
            raise
        if type(out) is tuple:
            k, found = out
            raise disallowed_error(found, f"texts[{k}]")
        return out

    def _encode_parallel(self, text, allowed_special, disallowed_special, num_threads, width):
        threads = _threads(num_threads)
        check_text(text)
        return self._encode_checked(lambda t, a, d: self._core.encode_parallel(t, a, d, threads, width),
                                    text, allowed_special, disallowed_special)

    def _allowed(self, allowed_special) -> set[str]:
        if allowed_special == "all":
            return set(self.special_tokens)
        return self._special_set(allowed_special, "allowed_special")

    def _disallowed(self, allowed: set[str], disallowed_special) -> set[str]:
        if disallowed_special == "all":
            return set(self.special_tokens) - allowed
        return self._special_set(disallowed_special, "disallowed_special")

    def _special_set(self, value, name: str) -> set[str]:
        """``allowed_special``/``disallowed_special`` (other than "all") as a set."""
        if isinstance(value, str) and value:
            # set("<|endoftext|>") would be a set of its characters.
            raise TypeError(f"{name} must be 'all' or a collection of special tokens, not the str {value!r}; "
                            f"for one token write {{{value!r}}}")
        try:
            chosen = set(value)
        except TypeError:  # not iterable, or an item is not hashable
            chosen = None
        # Usually every item is one of our special tokens, so a str: one set
        # comparison tells, where looking at each item would cost more.
        if chosen is None or not (chosen <= self._special_texts or all(isinstance(s, str) for s in chosen)):
            raise TypeError(f"{name} must be 'all' or a collection of special tokens (str), "
                            f"not {reprlib.repr(value)}")
        return chosen

    def _check_disallowed(self, text: str, allowed: set[str], disallowed_special) -> None:
        disallowed = self._disallowed(allowed, disallowed_special)
        if not disallowed:
            return
        try:
            found = self._core.find_special(text, sorted(disallowed))
        except UnicodeEncodeError:
            found = self._core.find_special(replace_surrogates(text), sorted(disallowed))
        if found is not None:
            raise disallowed_error(found)


def check_text(text) -> None:
    """A ``TypeError`` naming the argument for anything but a str (checked
    before the core, or on the default path after it refused the text)."""
    if not isinstance(text, str):
        hint = "; decode it first (e.g. text.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"text must be a str, not {type(text).__name__}{hint}")


