"""The Tokenizer: a byte-level BPE vocabulary you can train, use, save and load.

Its whole state is four fields, as in minbpe:

    merges          {(left_id, right_id): new_id}, in the order they were learned
    vocab           {id: bytes}, derived: ids 0..255 are single bytes, each merge
                    adds vocab[left] + vocab[right]
    pattern         the split regex (chunks are never merged across)
    special_tokens  {text: id}, taking the ids after the ordinary tokens

Everything that loops over text runs in the Rust core (``bpe._core``); this file
holds the defaults, validation, the special-token policy and the file format.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
import re
import secrets
import stat
import sys
import warnings
from pathlib import Path
from typing import Collection, Iterable, Literal, Sequence, Union

from bpe import _core
from bpe._core import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN

#: Pattern names accepted wherever a pattern is (tiktoken's names as aliases).
PATTERNS = {
    "gpt2": GPT2_PATTERN,
    "r50k": GPT2_PATTERN,
    "gpt4": GPT4_PATTERN,
    "cl100k": GPT4_PATTERN,
    "gpt4o": GPT4O_PATTERN,
    "o200k": GPT4O_PATTERN,
}

ENDOFTEXT = "<|endoftext|>"

PathLike = Union[str, "os.PathLike[str]"]
Source = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]

FILE_MAGIC = "bpe-tokenizer"
FILE_VERSION = 1

#: The largest token id (``MAX_ID`` in ``rust/encode.rs``): the decoder is a
#: table indexed by id, so a file claiming id 4,000,000,000 is refused, not
#: allocated. 2**24 - 1 is 80 times the largest vocabulary in use (o200k).
MAX_ID = 2**24 - 1
MAX_VOCAB_SIZE = MAX_ID + 1
#: A corpus file whose first this-many bytes hold a NUL byte is refused as
#: binary (as git and grep decide).
BINARY_SNIFF_BYTES = 64 << 10


class TokenizerFileError(ValueError):
    """A tokenizer file is truncated, corrupted, or of an unknown format/version."""


def resolve_pattern(pattern: str) -> str:
    """Returns the regex for a pattern name (``"gpt4"``, ``"cl100k"``, ...) or
    checks and returns a regex given as is.

    A bare word that is not a known name is refused: ``--pattern gpt5`` is far
    more likely a typo than a regex that matches the literal text "gpt5".
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    if pattern in PATTERNS:
        return PATTERNS[pattern]
    if re.fullmatch(r"[A-Za-z0-9_]+", pattern):
        names = ", ".join(PATTERNS)
        raise ValueError(f"unknown pattern name {pattern!r}; use one of {names}, or a regex")
    _pretokenizer(pattern)  # raises ValueError on an invalid regex
    return pattern


def pattern_name(pattern: str) -> str | None:
    """The short name of a built-in pattern, else None."""
    return {GPT2_PATTERN: "gpt2", GPT4_PATTERN: "gpt4", GPT4O_PATTERN: "gpt4o"}.get(pattern)


@functools.lru_cache(maxsize=16)
def _pretokenizer(pattern: str) -> _core.Pretokenizer:
    return _core.Pretokenizer(pattern)


def pretokenize(text: str, pattern: str = "gpt4") -> list[str]:
    """Splits ``text`` into the chunks BPE works inside: the same list as
    ``regex.findall(pattern, text)``, computed in Rust."""
    return _pretokenizer(resolve_pattern(pattern)).findall(text)


def _replace_surrogates(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; tiktoken replaces them with
    # U+FFFD this way, so we do too (ids then match tiktoken's).
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Tokenizer:
    """A byte-level BPE tokenizer. Build one with :meth:`train` or :meth:`load`."""

    def __init__(
        self,
        merges: dict[tuple[int, int], int] | Sequence[tuple[int, int]] = (),
        pattern: str = "gpt4",
        special_tokens: dict[str, int] | None = None,
        *,
        ranks: dict[bytes, int] | None = None,
    ):
        """Build from a merge list or from ranks.

        ``merges``: ``{(left, right): new}`` in learning order, or just the
        ``(left, right)`` pairs in order (new ids are then assigned as training
        does: the next free id, or the existing id of identical bytes). Ids
        0..255 are the single bytes.

        ``ranks``: instead of merges, a tiktoken-style ``{token bytes: rank}``
        (ids are the ranks; they may have holes). The merge list is recovered
        from the ranks when something needs it (see :attr:`merges`).
        """
        self.pattern = resolve_pattern(pattern)
        if ranks is not None:
            if merges:
                raise ValueError("give merges or ranks, not both")
            self.vocab = _vocab_from_ranks(ranks)
            self._merges: dict[tuple[int, int], int] | None = None  # recovered on demand
        else:
            self.vocab, self._merges = _replay(merges)
        self._from_merges = ranks is None
        self._set_special_tokens_and_core(special_tokens)

    @classmethod
    def _trained(cls, vocab, merges, pattern, special_tokens, make_core) -> "Tokenizer":
        """A Tokenizer from the trainer's own output (vocab and merges
        consistent by construction), skipping the merge replay of __init__;
        ``make_core(special_tokens)`` builds the encoder."""
        self = cls.__new__(cls)
        self.pattern, self.vocab, self._merges, self._from_merges = pattern, vocab, merges, True
        self._set_special_tokens_and_core(special_tokens, make_core)
        return self

    def _set_special_tokens_and_core(self, special_tokens, make_core=None) -> None:
        self.special_tokens: dict[str, int] = dict(special_tokens or {})
        for text, i in self.special_tokens.items():
            if not isinstance(text, str) or not text:
                raise ValueError(f"special tokens must be non-empty str, got {text!r}")
            _check_encodable(text)
            if isinstance(i, bool) or not isinstance(i, int) or i < 0 or i in self.vocab:
                raise ValueError(f"special token {text!r} has id {i!r}, which is taken or invalid")
        if len(set(self.special_tokens.values())) != len(self.special_tokens):
            raise ValueError("two special tokens share an id")
        _check_id_range(self.vocab, self.special_tokens)
        if make_core is None:
            self._core = _core.CoreBPE(self._ranks(), self.special_tokens, self.pattern)
        else:
            self._core = make_core(self.special_tokens)

    @property
    def merges(self) -> dict[tuple[int, int], int]:
        """``{(left, right): new}`` in order. For a vocabulary loaded from ranks
        (tiktoken), recovered on first use: a token of rank r is the merge of
        the two parts BPE makes of its bytes with the ranks below r. Raises
        ``ValueError`` if some token is not such a merge (encoding still works;
        only exports that need merges, like ``save_huggingface``, do not)."""
        if self._merges is None:
            self._merges = {(l, r): n for l, r, n in self._core.recover_merges()}
        return self._merges

    def _ranks(self) -> dict[bytes, int]:
        return {b: i for i, b in self.vocab.items()}

    # -- training -----------------------------------------------------------

    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: int,
        *,
        pattern: str = "gpt4",
        special_tokens: Collection[str] = (ENDOFTEXT,),
        progress: bool | None = None,
    ) -> "Tokenizer":
        """Learns a byte-level BPE vocabulary of ``vocab_size`` tokens.

        ``source``: a ``str`` (the text itself), a path (``pathlib.Path`` or any
        ``os.PathLike``) to a UTF-8 text file, or an iterable of ``str`` texts
        and/or paths. Each text and each file is one document. Everything is
        streamed: memory grows with the number of distinct chunks, not with the
        corpus. (A plain ``str`` is always text; wrap file names in ``Path``.)

        ``vocab_size`` counts everything: the 256 byte tokens, the merges, and
        the special tokens, which take the last ids (GPT-2's 50257 = 256 +
        50000 merges + 1). If the corpus runs out of pairs first, training stops
        early with a warning, and the tokenizer is smaller.

        Merge order is deterministic: the most frequent pair wins; ties go to
        the pair whose (left token bytes, right token bytes) is lexicographically
        smallest. The same corpus and arguments give the same merges on any
        machine, thread count and hash seed.

        ``progress``: show progress bars on stderr (default: when it is a terminal).
        """
        pattern = resolve_pattern(pattern)
        specials = _check_special_tokens(special_tokens)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
        minimum = 256 + len(specials)
        if vocab_size < minimum:
            raise ValueError(
                f"vocab_size {vocab_size} is too small: it must be at least {minimum} "
                f"(256 byte tokens + {len(specials)} special tokens)"
            )
        if vocab_size > MAX_VOCAB_SIZE:
            raise ValueError(
                f"vocab_size {vocab_size} is too large: it can be at most {MAX_VOCAB_SIZE} (2**24, "
                f"ids 0..{MAX_ID})"
            )
        if progress is None:
            progress = sys.stderr.isatty()

        trainer = _core.Trainer(pattern)
        fed = _feed(trainer, source, progress)
        if fed.empty():
            raise ValueError(
                f"the corpus is empty ({fed.describe()}): there is no text to learn merges from"
            )
        target = vocab_size - len(specials)
        # The state, made in Rust while the merge loop runs: {(left, right):
        # new} and {id: bytes}, and with them the encoder for these special
        # tokens (ids after the ordinary ones), which `trainer.encoder` hands over.
        merges, vocab = trainer.train(target, progress, list(specials))
        n_ordinary = len(vocab)
        if n_ordinary < target:
            warnings.warn(
                f"the corpus ran out of pairs to merge: the vocabulary has "
                f"{n_ordinary + len(specials)} tokens, not the {vocab_size} asked for",
                stacklevel=2,
            )
        special_ids = {s: n_ordinary + i for i, s in enumerate(specials)}
        tok = cls._trained(vocab, merges, pattern, special_ids, trainer.encoder)
        for s, i in special_ids.items():
            # A few specials: a scan per special is cheaper than a bytes -> id dict.
            b = s.encode("utf-8")
            if (j := next((j for j, t in vocab.items() if t == b), None)) is not None:
                warnings.warn(
                    f"special token {s!r} (id {i}) is also the ordinary token {j}: "
                    f"where it is allowed, text {s!r} becomes the special id, and decoding either id gives "
                    f"the same text; pick a text that does not occur in the corpus, like '<|{s}|>'",
                    stacklevel=2,
                )
        return tok

    # -- state --------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        """Number of ids: one more than the largest id."""
        return max([*self.vocab, *self.special_tokens.values()]) + 1

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self.special_tokens)

    def __repr__(self) -> str:
        name = pattern_name(self.pattern) or "custom"
        return f"<Tokenizer n_vocab={self.n_vocab} pattern={name} special_tokens={list(self.special_tokens)}>"

    # -- encoding -----------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes text, treating special-token text as ordinary text (the list
        is untracked by the cyclic garbage collector: see ``encode``)."""
        try:
            return self._core.encode_ordinary(text)
        except UnicodeEncodeError:
            return self._core.encode_ordinary(_replace_surrogates(text))

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
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
        """
        if disallowed_special == "all" and not allowed_special:
            # The default policy, in one call into Rust: short strings are
            # where per-call overhead shows, and most calls use the default.
            try:
                ids = self._core.encode_unless_special(text)
            except UnicodeEncodeError:
                ids = self._core.encode_unless_special(_replace_surrogates(text))
            if type(ids) is str:
                raise _disallowed_error(ids)
            return ids
        allowed = self._allowed(allowed_special)
        self._check_disallowed(text, allowed, disallowed_special)
        try:
            return self._core.encode(text, list(allowed))
        except UnicodeEncodeError:
            return self._core.encode(_replace_surrogates(text), list(allowed))

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ):
        """:meth:`encode`, returning a ``numpy.uint32`` array instead of a
        list: no Python int is made per token, which makes large texts
        faster to encode and 7 times smaller to hold (4 bytes per id instead
        of a list slot and an int object). Needs numpy."""
        try:
            import numpy as np
        except ImportError:
            raise ImportError(
                "encode_to_numpy needs numpy: pip install numpy (or use encode(), which returns a list)"
            ) from None
        allowed = self._allowed(allowed_special)
        self._check_disallowed(text, allowed, disallowed_special)
        try:
            raw = self._core.encode_u32(text, list(allowed))
        except UnicodeEncodeError:
            raw = self._core.encode_u32(_replace_surrogates(text), list(allowed))
        # A bytearray, so the array is writable and owns no copy of its own.
        return np.frombuffer(raw, dtype="<u4")

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
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of str; for one text use encode()")
        texts = list(texts)
        allowed = self._allowed(allowed_special)
        disallowed = sorted(self._disallowed(allowed, disallowed_special))
        threads = 0 if num_threads is None else int(num_threads)
        if threads < 0:
            raise ValueError("num_threads must be positive (or None for all cores)")
        try:
            out = self._core.encode_batch(texts, list(allowed), disallowed, threads)
        except UnicodeEncodeError:
            texts = [_replace_surrogates(t) for t in texts]
            out = self._core.encode_batch(texts, list(allowed), disallowed, threads)
        if type(out) is tuple:
            k, found = out
            raise _disallowed_error(found, f"texts[{k}]")
        return out

    def _allowed(self, allowed_special) -> set[str]:
        if allowed_special == "all":
            return set(self.special_tokens)
        return set(allowed_special)

    def _disallowed(self, allowed: set[str], disallowed_special) -> set[str]:
        if disallowed_special == "all":
            return set(self.special_tokens) - allowed
        return set(disallowed_special)

    def _check_disallowed(self, text: str, allowed: set[str], disallowed_special) -> None:
        disallowed = self._disallowed(allowed, disallowed_special)
        if not disallowed:
            return
        try:
            found = self._core.find_special(text, sorted(disallowed))
        except UnicodeEncodeError:
            found = self._core.find_special(_replace_surrogates(text), sorted(disallowed))
        if found is not None:
            raise _disallowed_error(found)

    # -- decoding -----------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a token sequence (may end mid-character)."""
        ids = ids if isinstance(ids, list) else list(ids)
        try:
            return self._core.decode_bytes(ids)
        except (OverflowError, TypeError) as e:
            # The slow path, only on error: name the first bad id and where it is.
            for k, i in enumerate(ids):
                if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < 2**32:
                    e = f"ids[{k}] is {i!r}"
                    break
            raise ValueError(f"token ids must be ints in 0..{self.n_vocab - 1}: {e}") from None

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decodes ids to text; ``errors`` is as for ``bytes.decode`` (default
        ``"replace"``: a sequence cut mid-character still decodes)."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def token_bytes(self, id: int) -> bytes:
        """The bytes of one token."""
        try:
            return self._core.token_bytes(id)
        except (OverflowError, TypeError) as e:
            raise ValueError(f"token id must be an int in 0..{self.n_vocab - 1}: {e}") from None

    # -- files --------------------------------------------------------------

    def save(self, path: PathLike) -> None:
        """Writes the tokenizer to one text file (format in README.md),
        atomically: a crash mid-save leaves the old file, never a partial one."""
        lines = [
            f"{FILE_MAGIC} v{FILE_VERSION}",
            f"pattern {json.dumps(self.pattern)}",
            f"special_tokens {len(self.special_tokens)}",
            *(f"{json.dumps(t)} {i}" for t, i in self.special_tokens.items()),
        ]
        if self._from_merges:
            lines += [f"merges {len(self.merges)}", *(f"{l} {r}" for (l, r) in self.merges)]
        else:
            # A rank vocabulary (e.g. from tiktoken): its ids need not follow
            # the byte-level layout that merge replay assumes, so store the
            # ranks themselves, as .tiktoken files do.
            lines += [f"ranks {len(self.vocab)}", *_tiktoken_lines(self.vocab)]
        body = "\n".join(lines) + "\n"
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
        atomic_write_text(path, body + f"sha256 {digest}\n")

    @classmethod
    def load(cls, path: PathLike) -> "Tokenizer":
        """Reads a file written by :meth:`save`. A missing, truncated,
        corrupted or wrong-version file raises an error naming the file."""
        path = os.fspath(path)
        with open(path, "rb") as f:
            raw = f.read()
        return cls._parse(raw, path)

    @classmethod
    def _parse(cls, raw: bytes, name: str) -> "Tokenizer":
        def fail(why: str) -> TokenizerFileError:
            return TokenizerFileError(f"{name}: {why}")

        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise fail("not a bpe tokenizer file (not UTF-8 text)") from None
        if text.startswith(FILE_MAGIC) and "\r\n" in text[:64]:
            # Windows line endings, as git's autocrlf leaves a checked-out file.
            # Tokens are base64 and the format has no other CR, so undoing the
            # conversion is exact; the checksum below still verifies the result.
            text = text.replace("\r\n", "\n")
        lines = text.split("\n")
        if not lines[0].startswith(FILE_MAGIC + " v"):
            raise fail(f"not a bpe tokenizer file (it does not start with '{FILE_MAGIC} v{FILE_VERSION}')")
        if lines[0] != f"{FILE_MAGIC} v{FILE_VERSION}":
            raise fail(
                f"unsupported format version {lines[0][len(FILE_MAGIC) + 1:]!r}; this bpe "
                f"reads v{FILE_VERSION} (upgrade bpe to read newer files)"
            )
        # The checksum line closes the file: without it the file is truncated.
        if len(lines) < 2 or lines[-1] != "" or not lines[-2].startswith("sha256 "):
            raise fail("truncated (the closing sha256 line is missing)")
        body = "\n".join(lines[:-2]) + "\n"
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != lines[-2][len("sha256 "):]:
            raise fail("corrupted (its sha256 checksum does not match its content)")
        try:
            it = iter(lines[1:-2])
            key, _, value = next(it).partition(" ")
            if key != "pattern":
                raise ValueError("expected the 'pattern' line")
            pattern = json.loads(value)
            key, _, value = next(it).partition(" ")
            if key != "special_tokens":
                raise ValueError("expected the 'special_tokens' line")
            specials = {}
            for _ in range(_count(value)):
                tok_json, _, i = next(it).rpartition(" ")
                special = json.loads(tok_json)
                if not isinstance(special, str) or special in specials:
                    raise ValueError(f"special token {special!r} is not a str or appears twice")
                specials[special] = _count(i)
            key, _, value = next(it).partition(" ")
            if key == "merges":
                merges = []
                for _ in range(_count(value)):
                    l, r = next(it).split(" ")
                    merges.append((_count(l), _count(r)))
                ranks = None
            elif key == "ranks":
                merges = ()
                n = _count(value)
                # A list, not a generator: a StopIteration inside a generator
                # becomes a RuntimeError (found by tests/test_reliability.py).
                ranks = _parse_tiktoken_lines([next(it) for _ in range(n)], name="the ranks section", blank_ok=False)
                if len(ranks) != n:  # pragma: no cover - blank lines are refused above
                    raise ValueError(f"the ranks section announces {n} tokens but holds {len(ranks)}")
            else:
                raise ValueError("expected the 'merges' or 'ranks' line")
            if next(it, None) is not None:
                raise ValueError("unexpected lines after the vocabulary")
            return cls(merges, pattern, specials, ranks=ranks)
        except StopIteration:
            raise fail("truncated (fewer lines than its header announces)") from None
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            raise fail(f"corrupted: {e}") from None

    # -- pickling (DataLoader workers, multiprocessing) ---------------------

    def __reduce__(self):
        if self._from_merges:
            return (Tokenizer, (self.merges, self.pattern, self.special_tokens))
        return (_from_ranks, (self._ranks(), self.pattern, self.special_tokens))

    def __eq__(self, other) -> bool:
        # The vocabulary (with its ids), the pattern and the special tokens
        # determine every encoding.
        return (
            isinstance(other, Tokenizer)
            and self.vocab == other.vocab
            and self.pattern == other.pattern
            and self.special_tokens == other.special_tokens
        )

    # -- tiktoken interop ---------------------------------------------------

    @classmethod
    def from_tiktoken(
        cls,
        src,
        *,
        pattern: str | None = None,
        special_tokens: dict[str, int] | None = None,
    ) -> "Tokenizer":
        """A Tokenizer with a tiktoken vocabulary; encodes id for id as tiktoken.

        ``src`` is one of:
          * a ``tiktoken.Encoding``;
          * an encoding name, loaded through tiktoken (which reads
            ``TIKTOKEN_CACHE_DIR``): ``"r50k_base"`` (alias ``"gpt2"``, the same
            ranks), ``"p50k_base"``, ``"cl100k_base"``, ``"o200k_base"``;
          * a path to a ``.tiktoken`` rank file: then ``pattern=`` is required
            (a rank file has none) and ``special_tokens=`` is optional.
        ``pattern``/``special_tokens`` override the encoding's own.
        """
        if isinstance(src, os.PathLike) or (
            isinstance(src, str) and (os.sep in src or src.endswith(".tiktoken") or os.path.isfile(src))
        ):
            path = os.fspath(src)
            if pattern is None:
                raise ValueError(
                    f"{path} holds only token ranks; pass pattern= too "
                    f"(e.g. pattern='gpt4' for cl100k_base, 'gpt4o' for o200k_base, 'gpt2' for r50k_base)"
                )
            with open(path, "rb") as f:
                ranks = _parse_tiktoken_lines(f.read().splitlines(), name=path)
            return cls(pattern=pattern, special_tokens=special_tokens or {}, ranks=ranks)
        if isinstance(src, str):
            tiktoken = _import_tiktoken()
            # tiktoken's "gpt2" is r50k_base's ranks in another file format.
            src = tiktoken.get_encoding({"gpt2": "r50k_base"}.get(src, src))
        try:
            ranks, pat, specials = src._mergeable_ranks, src._pat_str, src._special_tokens
        except AttributeError:
            raise TypeError(
                f"from_tiktoken takes a tiktoken.Encoding, an encoding name or a .tiktoken path, "
                f"not {type(src).__name__}"
            ) from None
        return cls(
            pattern=pat if pattern is None else pattern,
            special_tokens=dict(specials) if special_tokens is None else special_tokens,
            ranks=ranks,
        )

    def to_tiktoken(self, name: str = "bpe"):
        """A ``tiktoken.Encoding`` with our ranks, pattern and special tokens:
        it encodes every text to the same ids as this Tokenizer."""
        tiktoken = _import_tiktoken()
        return tiktoken.Encoding(
            name, pat_str=self.pattern, mergeable_ranks=self._ranks(), special_tokens=dict(self.special_tokens)
        )

    # -- HuggingFace interop ------------------------------------------------

    def save_huggingface(self, path: PathLike) -> None:
        """Writes a HuggingFace ``tokenizer.json`` (byte-level BPE, our split
        regex, special tokens as added tokens) that ``tokenizers.Tokenizer.from_file``
        loads and that encodes text to our ids (special tokens always allowed, as
        HuggingFace does). Needs the merge list (see :attr:`merges`)."""
        from bpe import huggingface

        atomic_write_text(path, huggingface.to_json(self.vocab, self.merges, self.pattern, self.special_tokens))

    @classmethod
    def from_huggingface(cls, path: PathLike) -> "Tokenizer":
        """Reads a byte-level BPE ``tokenizer.json`` (ours, GPT-2's, ...). Added
        tokens become special tokens. Refuses, with the reason, what it cannot
        reproduce exactly: normalizers, other pre-tokenizers, non-BPE models."""
        from bpe import huggingface

        path = os.fspath(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        ranks, pattern, specials = huggingface.from_json(text, path)
        return cls(pattern=pattern, special_tokens=specials, ranks=ranks)

    def save_tiktoken(self, path: PathLike) -> None:
        """Writes the ranks as a ``.tiktoken`` file (base64 token, space, rank;
        one per line). Like tiktoken's files it holds neither the pattern nor
        the special tokens: pass them to ``from_tiktoken`` or ``tiktoken.Encoding``."""
        atomic_write_text(path, "".join(line + "\n" for line in _tiktoken_lines(self.vocab)))

    __hash__ = None  # mutable state


def _from_ranks(ranks, pattern, special_tokens) -> Tokenizer:
    return Tokenizer(pattern=pattern, special_tokens=special_tokens, ranks=ranks)


def _replay(merges) -> tuple[dict[int, bytes], dict[tuple[int, int], int]]:
    """The vocabulary made by a merge list, from the 256 bytes."""
    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    ids = {b: i for i, b in vocab.items()}
    out: dict[tuple[int, int], int] = {}
    items = merges.items() if isinstance(merges, dict) else ((pair, None) for pair in merges)
    for (left, right), new in items:
        if left not in vocab or right not in vocab:
            raise ValueError(f"merge ({left}, {right}) uses an id that no earlier merge made")
        token = vocab[left] + vocab[right]
        expected = ids.get(token, len(vocab))
        if new is not None and new != expected:
            raise ValueError(f"merge ({left}, {right}) -> {new}: expected id {expected}")
        if expected == len(vocab):
            vocab[expected] = token
            ids[token] = expected
        out[(left, right)] = expected
    return vocab, out


def _vocab_from_ranks(ranks: dict[bytes, int]) -> dict[int, bytes]:
    vocab: dict[int, bytes] = {}
    for token, rank in ranks.items():
        if not isinstance(token, bytes) or not token:
            raise ValueError(f"ranks must map non-empty bytes to ids, got {token!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank of {token!r} must be a non-negative int, got {rank!r}")
        if rank in vocab:
            raise ValueError(f"tokens {vocab[rank]!r} and {token!r} both have rank {rank}")
        vocab[rank] = token
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(
            f"a byte-level vocabulary needs all 256 single bytes as tokens; {len(missing)} are "
            f"missing (e.g. byte {missing[0]})"
        )
    return vocab


def _tiktoken_lines(vocab: dict[int, bytes]) -> list[str]:
    return [f"{base64.b64encode(vocab[i]).decode('ascii')} {i}" for i in sorted(vocab)]


def _parse_tiktoken_lines(lines, name: str = "ranks", blank_ok: bool = True) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    first_line: dict[bytes, int] = {}
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("ascii", "replace")
        if not line.strip() and blank_ok:
            continue
        try:
            token, rank = line.split()
            token_bytes = base64.b64decode(token, validate=True)
            rank = _count(rank)
        except (ValueError, binascii.Error):
            raise ValueError(f"{name}: line {n} is not 'base64-token rank': {line[:80]!r}") from None
        if token_bytes in ranks:
            raise ValueError(
                f"{name}: line {n}: token {token_bytes!r} appears twice (first on line {first_line[token_bytes]}); "
                f"every token's bytes must be unique"
            )
        ranks[token_bytes] = rank
        first_line[token_bytes] = n
    return ranks


def _count(text: str) -> int:
    """A non-negative int written as this module writes it (no sign, no
    spaces, no leading zeros, ASCII digits only)."""
    if not re.fullmatch(r"0|[1-9][0-9]{0,18}", text):
        raise ValueError(f"{text[:40]!r} is not a non-negative integer")
    return int(text)


def _check_id_range(vocab: dict[int, bytes], special_tokens: dict[str, int]) -> None:
    """Every id must be at most MAX_ID (the Rust core checks it too; here the
    message names the token)."""
    if max(vocab, default=0) <= MAX_ID and max(special_tokens.values(), default=0) <= MAX_ID:
        return
    for token, i in [*((t, i) for i, t in vocab.items()), *special_tokens.items()]:
        if i > MAX_ID:
            raise ValueError(f"token {token!r} has id {i}, out of range: ids must be at most {MAX_ID}")


def _import_tiktoken():
    try:
        import tiktoken
    except ImportError:
        raise ImportError("this needs the tiktoken package: pip install tiktoken") from None
    return tiktoken


def _check_encodable(special: str) -> None:
    try:
        special.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"special token {special!r} is not valid text: it holds a lone surrogate, which has no UTF-8 form"
        ) from None


def _disallowed_error(found: str, where: str = "the text") -> ValueError:
    return ValueError(
        f"{where} contains the special token {found!r}, which is disallowed.\n"
        f"To encode it as the special token, pass allowed_special={{{found!r}}} "
        f"(or allowed_special='all').\n"
        f"To encode it as ordinary text, pass disallowed_special=() "
        f"or use encode_ordinary()."
    )


def _check_special_tokens(special_tokens: Collection[str]) -> list[str]:
    if isinstance(special_tokens, str):
        special_tokens = [special_tokens]
    specials = list(special_tokens)
    for s in specials:
        if not isinstance(s, str) or not s:
            raise ValueError(f"special tokens must be non-empty str, got {s!r}")
        _check_encodable(s)
    dupes = sorted({s for s in specials if specials.count(s) > 1})
    if dupes:
        raise ValueError(f"duplicate special tokens: {dupes}")
    return specials


# Documents are handed to Rust in batches of about this many characters: big
# enough to keep all cores busy, small enough to bound memory when streaming.
_BATCH_CHARS = 8 << 20


class _Fed:
    """What ``_feed`` gave the trainer: enough to call an empty corpus by its name."""

    def __init__(self):
        self.n_texts = self.text_chars = self.file_bytes = 0
        self.files: list[str] = []

    def empty(self) -> bool:
        return self.text_chars == 0 and self.file_bytes == 0

    def describe(self) -> str:
        parts = []
        if self.n_texts or not self.files:
            parts.append("no texts" if not self.n_texts else f"{self.n_texts} empty text(s)")
        if self.files:
            shown = ", ".join(self.files[:3]) + (", ..." if len(self.files) > 3 else "")
            parts.append(f"{len(self.files)} empty file(s): {shown}")
        return " and ".join(parts)


def _feed(trainer: _core.Trainer, source: Source, progress: bool) -> _Fed:
    """Streams ``source`` into the trainer (see Tokenizer.train)."""
    fed = _Fed()
    if isinstance(source, str):
        if len(source) < 4096 and "\n" not in source and os.path.isfile(source):
            warnings.warn(
                f"training on the text {source!r} itself, which is also the name of a file; "
                f"to train on the file, pass pathlib.Path({source!r})",
                stacklevel=3,
            )
        fed.n_texts, fed.text_chars = 1, len(source)
        _feed_texts(trainer, [source])
        return fed
    if isinstance(source, (bytes, bytearray)):
        raise TypeError("source must be text (str) or paths, not bytes; decode it first")
    if isinstance(source, os.PathLike):
        source = [source]
    batch: list[str] = []
    size = 0
    files: list[str] = []
    for i, item in enumerate(source):
        if isinstance(item, str):
            batch.append(item)
            size += len(item)
            fed.n_texts += 1
            fed.text_chars += len(item)
            if size >= _BATCH_CHARS:
                _feed_texts(trainer, batch)
                batch, size = [], 0
        elif isinstance(item, os.PathLike):
            files.append(check_text_file(item))
            fed.file_bytes += os.path.getsize(files[-1])
        else:
            raise TypeError(f"source item {i} is a {type(item).__name__}; expected str (text) or a path")
    fed.files = files
    if batch:
        _feed_texts(trainer, batch)
    if files:
        trainer.feed_files(files, progress)
    return fed


def _feed_texts(trainer: _core.Trainer, texts: list[str]) -> None:
    try:
        trainer.feed_texts(texts)
    except UnicodeEncodeError:
        # A lone surrogate (from e.g. `errors="surrogateescape"`) has no UTF-8
        # form. Train on what `encode` will see: U+FFFD in its place, as
        # tiktoken does. Nothing was counted yet: conversion precedes counting.
        trainer.feed_texts([_replace_surrogates(t) for t in texts])


def check_readable_file(path: PathLike) -> str:
    """Returns the path as str, or raises a clear error if it is not a readable file."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p} is a directory, not a text file")
    if not os.path.exists(p):
        raise FileNotFoundError(f"{p}: no such file")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"{p}: permission denied")
    if not stat.S_ISREG(os.stat(p).st_mode):
        # A pipe (`<(zcat c.gz)`), socket or device can be read only once, and
        # files are read twice (the binary check here, then the text), so the
        # text would silently lose its start. Refuse rather than lose data.
        raise ValueError(
            f"{p} is not a regular file (a pipe or a device): bpe reads text files more than "
            f"once; save the text to a file first (e.g. `zcat corpus.gz > corpus.txt`)"
        )
    return p


def check_text_file(path: PathLike) -> str:
    """:func:`check_readable_file`, and refuses a binary file: one whose first
    ``BINARY_SNIFF_BYTES`` bytes hold a NUL byte (no text file has one)."""
    p = check_readable_file(path)
    with open(p, "rb") as f:
        head = f.read(BINARY_SNIFF_BYTES)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(
            f"{p} looks like UTF-16 (or UTF-32) text: it starts with a byte-order mark; "
            f"convert it to UTF-8 first (e.g. `iconv -f utf-16 -t utf-8 {p} > out.txt`)"
        )
    nul = head.find(b"\0")
    if nul >= 0:
        line = head.count(b"\n", 0, nul) + 1
        raise ValueError(
            f"{p} looks like a binary file, not text: it has a NUL byte at byte offset {nul} "
            f"(line {line}); give UTF-8 text files"
        )
    return p


def atomic_write_text(path: PathLike, text: str) -> None:
    """Writes a UTF-8 text file atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def atomic_write(path: PathLike, fill) -> None:
    """Writes a file atomically: ``fill(f)`` writes into a temporary binary
    file beside the target, which is flushed to disk and then renamed over the
    target (rename is atomic on POSIX). A crash or Ctrl-C at any point leaves
    either the old file or the new one, never a partial one."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # keep the mode of the file we replace
    except FileNotFoundError:
        mode = 0o666  # as open() would; the kernel applies the umask
    # Not tempfile.mkstemp: it forces mode 0600 on the result.
    tmp = os.path.join(directory, f".bpe-{os.getpid()}-{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
