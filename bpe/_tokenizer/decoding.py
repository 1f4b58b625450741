"""Decoding ids: the methods of :class:`bpe.Tokenizer` that turn ids back
into bytes and text (one call, or a stream: ``bpe/decoder.py``)."""

from __future__ import annotations

import operator
from typing import Iterable

from bpe._util.errors import TokenIdOverflowError, UnknownTokenError
from bpe.decoder import StreamDecoder, _check_errors

__all__ = ["Decoders"]


class Decoders:
    """Mixed into :class:`bpe.Tokenizer`."""

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a token sequence (may end mid-character). An id that
        is not an int (a bool included) raises ``TypeError``, one below 0 or
        past 2**32 - 1 ``OverflowError``, one the vocabulary does not have
        ``KeyError`` (as tiktoken; both are ``ValueError`` too), each naming
        the first such id and its index."""
        if not isinstance(ids, list):
            ids = _ids_list(ids)
        try:
            out = self._core.decode_bytes(ids)
        except (OverflowError, TypeError) as e:
            # The slow path, only on error: name the first bad id and where it is.
            raise self._bad_id(ids, e) from None
        except ValueError as e:  # an id the vocabulary does not have
            raise UnknownTokenError(str(e)) from None
        # (A bool is refused by the core: rust/py/lists.rs, ids_of.)
        return out

    def _bad_id(self, ids: list, error: Exception) -> Exception:
        """The error for the first item of ``ids`` that is not a token id."""
        top = self.n_vocab - 1
        for k, i in enumerate(ids):
            if isinstance(i, bool) or not _is_int(i):
                return TypeError(f"token ids must be ints in 0..{top}: ids[{k}] is {i!r}, not an int")
            if not 0 <= i < 2**32:
                return TokenIdOverflowError(f"token ids must be ints in 0..{top}: ids[{k}] is {i!r}")
        return ValueError(f"token ids must be ints in 0..{top}: {error}")  # pragma: no cover - not seen

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decodes ids to text; ``errors`` is as for ``bytes.decode`` (default
        ``"replace"``: a sequence cut mid-character still decodes)."""
        if errors != "replace":
            _check_errors(errors)
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def decoder(self, errors: str = "replace") -> StreamDecoder:
        """A streaming decoder: ``feed(ids)`` returns the whole characters the
        ids complete, ``flush()`` the rest; together exactly ``decode(ids,
        errors)`` however the ids are cut (bpe/decoder.py)."""
        return StreamDecoder(self, errors)

    def token_bytes(self, id: int) -> bytes:
        """The bytes of one token."""
        if type(id) is bool:  # the core would take it as 0 or 1
            raise TypeError(f"token id must be an int in 0..{self.n_vocab - 1}, not {id!r}")
        try:
            return self._core.token_bytes(id)
        except TypeError:
            raise TypeError(f"token id must be an int in 0..{self.n_vocab - 1}, not {id!r}") from None
        except OverflowError:
            raise TokenIdOverflowError(f"token id must be an int in 0..{self.n_vocab - 1}, not {id!r}") from None
        except ValueError as e:
            raise UnknownTokenError(str(e)) from None


def _ids_list(ids) -> list:
    """Token ids given as another iterable (a tuple, an array), as a list."""
    if isinstance(ids, str):
        raise TypeError("ids must be token ids (ints), not a str; to encode text, use encode()")
    try:
        it = iter(ids)
    except TypeError:
        raise TypeError(f"ids must be a list of token ids (ints), not {type(ids).__name__}") from None
    return list(it)


def _is_int(i) -> bool:
    """An int, or an int of another kind (numpy's), as the core takes it."""
    try:
        operator.index(i)
    except TypeError:
        return False
    return True


