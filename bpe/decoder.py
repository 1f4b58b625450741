"""Streaming decode: text out as ids come in, one token at a time.

A byte-level token may end in the middle of a UTF-8 character ("é" can be two
tokens, an emoji four), so decoding each token alone would print U+FFFD where
the whole sequence has a letter. :class:`StreamDecoder` keeps the incomplete
tail of the bytes seen so far and hands out only whole characters; its output,
concatenated and followed by :meth:`StreamDecoder.flush`, is exactly
``tok.decode(ids, errors=...)``, however the ids are cut into calls.

The bytes of each id come from the core (``decode_bytes``); the UTF-8
bookkeeping is Python's own incremental decoder (``codecs``), which decodes a
stream cut anywhere to the same text as decoding it whole, error handlers
included. Nothing here loops over bytes in Python.
"""

from __future__ import annotations

import codecs
import operator
from typing import Iterable, Protocol, SupportsIndex, Union, cast

from bpe._util.errors import ErrorHandlerError

#: The ``errors`` handlers that apply to decoding (``bytes.decode``).
DECODE_ERRORS = ("replace", "strict", "ignore", "backslashreplace", "surrogateescape", "surrogatepass")


def _check_errors(errors: object) -> None:
    """Checks ``decode``'s ``errors`` up front: ``bytes.decode`` looks it up
    only when it meets a bad byte, so a typo would pass every test on clean text."""
    if not isinstance(errors, str):
        raise TypeError(f"errors must be a str (one of {', '.join(DECODE_ERRORS)}), not {type(errors).__name__}")
    try:
        codecs.lookup_error(errors)
    except LookupError:
        raise ErrorHandlerError(
            f"errors={errors!r} is not an error handler; use one of {', '.join(DECODE_ERRORS)} "
            f"(or a name given to codecs.register_error)"
        ) from None
    if errors in ("xmlcharrefreplace", "namereplace"):
        raise ValueError(f"errors={errors!r} is for encoding text, not decoding; use one of {', '.join(DECODE_ERRORS)}")


class _Bytes(Protocol):
    """What the decoder needs of a tokenizer (this module cannot import
    bpe.tokenizer, which imports it)."""

    def decode_bytes(self, ids: Iterable[int]) -> bytes: ...

    def token_bytes(self, id: int) -> bytes: ...


class StreamDecoder:
    """Made by :meth:`bpe.Tokenizer.decoder`; see the module docstring."""

    def __init__(self, tokenizer: _Bytes, errors: str = "replace") -> None:
        _check_errors(errors)
        self.errors = errors
        self._tok = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors)

    def feed(self, ids: Union[SupportsIndex, Iterable[SupportsIndex]]) -> str:
        """The text the ids complete: every whole character so far that was
        not returned yet. An incomplete character at the end waits for the
        next call. ``ids``: one id, or an iterable of ids. A bad id raises
        as ``decode_bytes`` does and leaves the decoder as it was."""
        if isinstance(ids, bool):
            raise TypeError(f"ids must be a token id (int) or an iterable of them, not {ids!r}")
        if isinstance(ids, int):  # the common case: one id as it is sampled
            data = self._tok.token_bytes(ids)
        else:
            try:
                one = operator.index(cast(SupportsIndex, ids))  # an int of another kind: numpy's, a 0-d array
            except TypeError:
                data = self._tok.decode_bytes(cast(Iterable[int], ids))  # an iterable of ids (or the error naming it)
            else:
                data = self._tok.token_bytes(one)
        return self._utf8.decode(data, final=False)

    def flush(self) -> str:
        """What is left: an incomplete character at the end decoded under
        ``errors`` (U+FFFD under "replace"; ``UnicodeDecodeError``, a
        ``ValueError``, under "strict"). The decoder is then empty and can be
        fed a new sequence."""
        try:
            return self._utf8.decode(b"", final=True)
        finally:
            self._utf8.reset()

    def pending(self) -> bytes:
        """The bytes held back: the start of a character not yet complete."""
        return self._utf8.getstate()[0]

    def __repr__(self) -> str:
        return f"<StreamDecoder errors={self.errors!r} pending={self.pending()!r}>"
