"""tiktoken's ``Encoding`` surface: the methods and attributes of
:class:`bpe.Tokenizer` that code written for tiktoken calls, with tiktoken's
semantics, defaults and exception types (docs/tiktoken.md has the table).

The encoders and decoders themselves are bpe's (``encoding.py``,
``decoding.py``); this file adds what tiktoken has beside them: single
tokens, batches of decodes, character offsets, the unstable tail of an
encoding, bytes in, and the read-only views third-party converters read
(``_mergeable_ranks``, ``_special_tokens``, ``_pat_str``), each made on
first use.
"""

from __future__ import annotations

import bisect
from types import MappingProxyType
from typing import AbstractSet, Collection, Literal, Mapping, Sequence

from bpe._tokenizer.picky import refuse
from bpe._tokenizer.superbpe import refuse as refuse_superbpe
from bpe._tokenizer.bulk import _threads
from bpe._util.errors import UnknownTokenError
from bpe.decoder import _check_errors
from bpe._util.patterns import pattern_name, pretokenize
from bpe._util.specials import ENDOFTEXT
from bpe.sources.corpus import replace_surrogates

__all__ = ["TiktokenSurface"]

_SPACE = frozenset(b" \n\t")


class TiktokenSurface:
    """Mixed into :class:`bpe.Tokenizer`."""

    # -- what it is -------------------------------------------------------------

    @property
    def name(self) -> str:
        """The encoding's name: OpenAI's (``"cl100k_base"``) for theirs, the
        file's stem for a loaded file, else one made from the pattern and the
        size (``"bpe_gpt4_4096"``). May be set."""
        given = self.__dict__.get("_name")
        return given if given is not None else f"bpe_{pattern_name(self.pattern) or 'custom'}_{self.n_vocab}"

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"name must be a str, not {type(value).__name__}")
        self._name = value

    @property
    def max_token_value(self) -> int:
        """The largest id, special tokens included (``n_vocab - 1``)."""
        return self.n_vocab - 1

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>`` (``KeyError`` if it has none, as tiktoken)."""
        return self.special_tokens[ENDOFTEXT]

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token."""
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"token must be an int (a token id), not {type(token).__name__}")
        return token in self._special_ids()

    def token_byte_values(self) -> list[bytes]:
        """Every ordinary token's bytes, sorted (special tokens left out)."""
        return list(self._sorted_token_bytes())

    # -- the views converters read ------------------------------------------------

    @property
    def _mergeable_ranks(self) -> Mapping[bytes, int]:
        """``{token bytes: id}`` of the ordinary tokens, read-only (tiktoken's
        ``mergeable_ranks``, which transformers' and vLLM's converters read).
        A Picky BPE or SuperBPE vocabulary has none: ranks do not encode as
        it does."""
        if self.picky is not None:  # type: ignore[attr-defined]
            raise refuse("_mergeable_ranks (ranks)")
        if self.superbpe is not None:  # type: ignore[attr-defined]
            raise refuse_superbpe("_mergeable_ranks (ranks)")
        return MappingProxyType(self._token_ids())

    @property
    def _special_tokens(self) -> Mapping[str, int]:
        """``{text: id}`` of the special tokens, read-only."""
        return MappingProxyType(self.special_tokens)

    @property
    def _pat_str(self) -> str:
        """The split pattern (tiktoken's ``pat_str``)."""
        return self.pattern

    # -- encoding ---------------------------------------------------------------

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text, in parallel (``num_threads``:
        default all cores)."""
        return self.encode_batch(text, num_threads=num_threads, disallowed_special=())

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of the one token whose text (or bytes) this is, special
        tokens included; ``KeyError`` if there is none."""
        if isinstance(text_or_bytes, str):
            piece = text_or_bytes.encode("utf-8", "surrogatepass")
        elif isinstance(text_or_bytes, (bytes, bytearray, memoryview)):
            piece = bytes(text_or_bytes)
        else:
            raise TypeError(f"text_or_bytes must be a str or bytes, not {type(text_or_bytes).__name__}")
        found = self._token_ids().get(piece)
        if found is not None:
            return found
        try:
            return self.special_tokens[piece.decode("utf-8")]
        except (UnicodeDecodeError, KeyError):
            raise UnknownTokenError(f"{text_or_bytes!r} is not a token of this vocabulary") from None

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encodes bytes that may not be UTF-8 (tiktoken's ``_encode_bytes``):
        UTF-8 bytes as :meth:`encode_ordinary` does; otherwise the longest
        UTF-8 prefix is encoded, and its last piece (with any whitespace
        tokens before it) is encoded again together with the bytes after the
        prefix, as one piece."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        data = bytes(data)
        try:
            return self.encode_ordinary(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            valid = e.start
        tokens, last = self._tokens_and_last_piece(data[:valid].decode("utf-8"), frozenset())
        tokens, last = self._widen_over_spaces(tokens, last)
        if tokens and last:
            unstable = self.decode_bytes(tokens[len(tokens) - last:]) + data[valid:]
            del tokens[len(tokens) - last:]
        else:
            unstable = data[valid:]
        if unstable:
            whole = self._token_ids().get(unstable)
            tokens.extend([whole] if whole is not None else self._core.encode_single_piece(unstable))
        return tokens

    _encode_bytes = encode_bytes

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """BPE on ``text_or_bytes`` as one piece, without the split pattern."""
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        return self._core.encode_single_piece(bytes(text_or_bytes))

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """The stable tokens of ``text`` and the token sequences its last,
        unstable piece may become once more text follows (tiktoken's
        definition, an unstable API there too): the stable tokens decode to
        a prefix of ``text``, and each completion, after them, to something
        that starts with ``text``."""
        allowed = self._allowed(allowed_special)
        self._check_disallowed(text, allowed, disallowed_special)
        tokens, last = self._tokens_and_last_piece(text, allowed)
        if last == 0:
            return tokens, []
        tokens, last = self._widen_over_spaces(tokens, last)
        unstable = self.decode_bytes(tokens[len(tokens) - last:])
        del tokens[len(tokens) - last:]
        completions: set[tuple[int, ...]] = set()
        if not unstable:
            return tokens, []
        ids = self._token_ids()
        # Every token that starts with the unstable bytes.
        completions.update((ids[t],) for t in self._tokens_starting_with(unstable))
        # A token straddling each other cut of the unstable bytes: its bytes
        # after the cut, encoded again from the cut's prefix, up to the
        # unstable bytes' length.
        for cut in range(1, len(unstable)):
            prefix, suffix = unstable[:cut], unstable[cut:]
            for t in self._tokens_starting_with(suffix):
                possible = prefix + t
                try:
                    encoded = self.encode_ordinary(possible.decode("utf-8"))
                except UnicodeDecodeError:
                    encoded = self._core.encode_single_piece(possible)
                seq, covered = [], 0
                for token in encoded:
                    seq.append(token)
                    covered += len(self.vocab[token])
                    if covered >= len(unstable):
                        break
                completions.add(tuple(seq))
        # A split the pattern would make before a last whitespace character.
        if len(unstable) > 1:
            char, size = _last_char(unstable)
            if len(unstable) > size and char is not None and _is_white_space(char):
                completions.add(tuple(self._core.encode_single_piece(unstable[:-size])
                                      + self._core.encode_single_piece(unstable[-size:])))
        return tokens, [list(c) for c in completions]

    # -- decoding ---------------------------------------------------------------

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token, special tokens included; ``KeyError`` for
        an id the vocabulary does not have."""
        return self.token_bytes(token)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """Each token's bytes (to see how a text was cut)."""
        return [self.token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text and, for each token, the index of the first character it
        contributes bytes to (tiktoken's character offsets). The bytes must
        be UTF-8 (``UnicodeDecodeError`` otherwise). :meth:`encode_with_offsets`
        gives offsets while encoding."""
        parts = self.decode_tokens_bytes(tokens)
        offsets, chars = [], 0
        for b in parts:
            # A token that starts inside a character points at that character.
            offsets.append(max(0, chars - (0x80 <= b[0] < 0xC0)) if b else chars)
            chars += sum(1 for c in b if not 0x80 <= c < 0xC0)
        return b"".join(parts).decode("utf-8", errors="strict"), offsets

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int | None = None) -> list[str]:
        """:meth:`decode` of each token list."""
        return [b.decode("utf-8", errors) for b in self._decode_all(batch, errors, num_threads)]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int | None = None) -> list[bytes]:
        """:meth:`decode_bytes` of each token list."""
        return self._decode_all(batch, None, num_threads)

    # -- helpers ----------------------------------------------------------------

    def _decode_all(self, batch, errors, num_threads) -> list[bytes]:
        """The bytes of each id list, decoded on the core's threads; on a bad
        id, the error :meth:`decode_bytes` gives for the first list that has one."""
        if errors is not None and errors != "replace":
            _check_errors(errors)
        if isinstance(batch, (str, bytes)):
            raise TypeError(f"batch must be a list of token id lists, not {type(batch).__name__}")
        batch = list(batch)
        try:
            return self._core.decode_bytes_batch(batch, _threads(num_threads))
        except (ValueError, TypeError, OverflowError):
            return [self.decode_bytes(ids) for ids in batch]  # raises, naming the id

    def _token_ids(self) -> dict[bytes, int]:
        """``{bytes: id}`` of the ordinary tokens, made once."""
        ids = self.__dict__.get("_token_ids_cache")
        if ids is None:
            ids = self.__dict__["_token_ids_cache"] = {b: i for i, b in self.vocab.items()}
        return ids

    def _special_ids(self) -> frozenset[int]:
        ids = self.__dict__.get("_special_ids_cache")
        if ids is None:
            ids = self.__dict__["_special_ids_cache"] = frozenset(self.special_tokens.values())
        return ids

    def _sorted_token_bytes(self) -> list[bytes]:
        s = self.__dict__.get("_sorted_bytes_cache")
        if s is None:
            s = self.__dict__["_sorted_bytes_cache"] = sorted(self.vocab.values())
        return s

    def _tokens_starting_with(self, prefix: bytes):
        s = self._sorted_token_bytes()
        k = bisect.bisect_left(s, prefix)
        while k < len(s) and s[k].startswith(prefix):
            yield s[k]
            k += 1

    def _tokens_and_last_piece(self, text: str, allowed) -> tuple[list[int], int]:
        """The ids of ``text`` (``allowed`` special tokens as theirs, other
        special-token text as text) and how many of the last ids its last
        piece of the split pattern made (0 if it ends with a special token)."""
        tokens = self.encode(text, allowed_special=allowed, disallowed_special=())
        special = {self.special_tokens[s] for s in allowed}
        k = max((i for i, t in enumerate(tokens) if t in special), default=-1)
        if k == len(tokens) - 1 and k >= 0:
            return tokens, 0
        data = replace_surrogates(text).encode("utf-8")
        start = len(self.decode_bytes(tokens[: k + 1])) if k >= 0 else 0
        rest = data[start:].decode("utf-8")
        pieces = pretokenize(rest, self.pattern)
        return tokens, (len(self.encode_ordinary(pieces[-1])) if pieces else 0)

    def _widen_over_spaces(self, tokens: list[int], last: int) -> tuple[list[int], int]:
        """The last piece widened over the whitespace-only tokens before it,
        when it starts with one: a split of the pattern there (``\\s*[\\r\\n]``)
        may disappear once text follows."""
        def spaces(t: int) -> bool:
            b = self.vocab.get(t)
            return b is not None and all(c in _SPACE for c in b)

        if last > 0 and spaces(tokens[len(tokens) - last]):
            while last < len(tokens) and spaces(tokens[len(tokens) - last - 1]):
                last += 1
        return tokens, last


def _last_char(data: bytes) -> tuple[str | None, int]:
    """The last UTF-8 character of ``data`` and its length in bytes; (None,
    1) when the last byte ends no valid character."""
    for n in (1, 2, 3, 4):
        if n > len(data):
            break
        try:
            return data[-n:].decode("utf-8"), n
        except UnicodeDecodeError:
            continue
    return None, 1


def _is_white_space(char: str) -> bool:
    """Unicode's White_Space property (str.isspace also takes the
    information separators U+001C..U+001F, which it has not)."""
    return char.isspace() and char not in "\x1c\x1d\x1e\x1f"
