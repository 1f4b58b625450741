"""The Tokenizer: a byte-level BPE vocabulary you can train, use, save and load.

Its whole state is four fields, as in minbpe:

    merges          {(left_id, right_id): new_id}, in the order they were learned
    vocab           {id: bytes}, derived: ids 0..255 are single bytes, each merge
                    adds vocab[left] + vocab[right]
    pattern         the split regex (chunks are never merged across)
    special_tokens  {text: id}, taking the ids after the ordinary tokens

Everything that loops over text runs in the Rust core (``bpe._core``); this file
holds the class: its defaults and validation, calling on ``patterns``, ``vocab``,
``specials``, ``corpus``, ``fileformat`` and ``files`` for the rest.
"""

from __future__ import annotations

import operator
import os
import reprlib
import warnings
from collections.abc import Mapping
from typing import Collection, Iterable, Literal, Sequence, overload

from bpe import _core, fileformat
from bpe.budgets import Budgets
from bpe.interop import Interop
from bpe.pretrained import Pretrained
from bpe.bulk import BulkEncoding, _check_texts, _texts, _threads
from bpe.corpus import Source, replace_surrogates
from bpe.decoder import DECODE_ERRORS, StreamDecoder, _check_errors  # noqa: F401 (re-exported)
from bpe.dropout import Dropout
from bpe.extend import Reshaping
from bpe.offsets import Measuring
from bpe.counts import Counts, capped_trainer, check_min_frequency, check_progress, feed_capped, trainer_for
from bpe.fileformat import FILE_MAGIC, FILE_VERSION, TokenizerFileError, read_file
from bpe.files import PathLike, atomic_write_text
from bpe.patterns import PATTERNS, pattern_name, pretokenize, resolve_pattern
from bpe.sources import SourceOptions, skipped_message
from bpe.specials import ENDOFTEXT, check_assigned, check_special_tokens, disallowed_error
from bpe.vocab import MAX_ID, MAX_VOCAB_SIZE, check_id_range, replay, vocab_from_ranks

#: ``train``'s default special tokens, told apart (by identity) from the same
#: tokens given: with ``base=``, the default means the base's own.
_DEFAULT_SPECIALS = (ENDOFTEXT,)

# Names other modules and tests have long imported from here.
__all__ = [
    "ENDOFTEXT", "FILE_MAGIC", "FILE_VERSION", "MAX_ID", "MAX_VOCAB_SIZE", "PATTERNS",
    "Tokenizer", "TokenizerFileError", "pattern_name", "pretokenize", "resolve_pattern",
]


class Tokenizer(Interop, Pretrained, Budgets, BulkEncoding, Measuring, Dropout, Reshaping):
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
        if not isinstance(merges, Iterable):
            raise TypeError(f"merges must be a dict {{(left, right): new}} or a list of (left, right) pairs, "
                            f"not {type(merges).__name__}")
        if special_tokens is not None and not isinstance(special_tokens, Mapping):
            raise TypeError(
                f"special_tokens must be a dict {{text: id}} (or None), not {type(special_tokens).__name__}"
            )
        if ranks is not None:
            if not isinstance(ranks, Mapping):
                raise TypeError(f"ranks must be a dict {{token bytes: rank}} (or None), not {type(ranks).__name__}")
            if merges:
                raise ValueError("give merges or ranks, not both")
            self.vocab = vocab_from_ranks(ranks)
            self._merges: dict[tuple[int, int], int] | None = None  # recovered on demand
        else:
            self.vocab, self._merges = replay(merges)
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
        self.special_tokens: dict[str, int] = check_assigned(special_tokens, self.vocab)
        check_id_range(self.vocab, self.special_tokens)
        if make_core is None:
            self._core = _core.CoreBPE(self._ranks(), self.special_tokens, self.pattern)
        else:
            self._core = make_core(self.special_tokens)
        self._special_texts = frozenset(self.special_tokens)  # for _special_set's quick check

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

    # For type checkers: one size gives a Tokenizer, a list of sizes a list.
    @overload
    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: int,
        *,
        pattern: str | None = ...,
        special_tokens: Collection[str] = ...,
        progress: bool | None = ...,
        text_field: str = ...,
        skip_bad: bool = ...,
        max_memory: int | str | None = ...,
        min_frequency: int | None = ...,
        base: "Tokenizer | PathLike | None" = ...,
    ) -> "Tokenizer": ...

    @overload
    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: Sequence[int],
        *,
        pattern: str | None = ...,
        special_tokens: Collection[str] = ...,
        progress: bool | None = ...,
        text_field: str = ...,
        skip_bad: bool = ...,
        max_memory: int | str | None = ...,
        min_frequency: int | None = ...,
        base: "Tokenizer | PathLike | None" = ...,
    ) -> "list[Tokenizer]": ...

    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: int | Sequence[int],
        *,
        pattern: str | None = None,
        special_tokens: Collection[str] = _DEFAULT_SPECIALS,
        progress: bool | None = None,
        text_field: str = "text",
        skip_bad: bool = False,
        max_memory: int | str | None = None,
        min_frequency: int | None = None,
        base: "Tokenizer | PathLike | None" = None,
    ) -> "Tokenizer | list[Tokenizer]":
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

        Paths may also name JSON Lines files (``.jsonl``, ``.ndjson``,
        ``.json``: one document per record, its text in ``text_field``, e.g.
        ``"text"`` or ``"meta.body"``), Parquet files (``.parquet``: a column,
        read in Rust), any of these or text compressed (``.gz``, ``.zst``,
        ``.xz``, ``.bz2``), and directories (every file under them); see
        ``bpe/sources.py``. ``source`` may also be a pyarrow Table or
        RecordBatchReader or a HuggingFace dataset (its ``text_field`` column).
        A bad record (no such field, not a string, not JSON, not UTF-8) is an
        error naming the file and line; with ``skip_bad`` it is skipped, and
        a warning says how many were.

        ``progress``: show progress bars on stderr (default: when it is a terminal).

        ``max_memory``: a cap on the counting maps (bytes, or "2G", "512M"):
        past it, counts spill to sorted files in the temporary directory and
        are merged exactly at the end (see ``bpe.count``). ``min_frequency``:
        drop the chunks seen fewer times before the merge loop (the one lossy
        knob, which bounds the merge loop's memory).

        ``vocab_size`` may be a list of sizes: one training, and a list of
        tokenizers, each the one training that size alone gives (the largest
        :meth:`shrink`-ed; see bpe/extend.py). ``pattern`` defaults to gpt4.

        ``base``: extend this tokenizer (a Tokenizer, a tokenizer file, or a
        name such as ``"cl100k"``) instead of starting from bytes: every id
        and merge of it is kept, and only new merges are learned on top, up to
        ``vocab_size`` tokens in all (more than the base's). Its pattern is
        used (a different ``pattern=`` is an error) and its special tokens
        kept, each at its id unless a new token needs that id (then at the
        first free ids after the new tokens); ``special_tokens`` adds more.
        """
        options = SourceOptions(text_field=text_field, skip_bad=skip_bad)
        if base is not None:
            base = cls._as_base(base)
            if pattern is not None and resolve_pattern(pattern) != base.pattern:
                raise ValueError("extending with a base whose pattern differs from pattern=: the base's ids hold "
                                 "only under its own pattern; leave pattern= out (the base's is used)")
            pattern = base.pattern
        pattern = resolve_pattern(pattern or "gpt4")
        if isinstance(vocab_size, (list, tuple)):
            return cls._train_sizes(source, list(vocab_size), pattern=pattern, special_tokens=special_tokens,
                                    progress=progress, text_field=text_field, skip_bad=skip_bad,
                                    max_memory=max_memory, min_frequency=min_frequency, base=base)
        if base is not None:
            # (Not given: the base's special tokens, and no more.)
            added = None if special_tokens is _DEFAULT_SPECIALS else special_tokens
            new, extra = cls._base_plan(base, vocab_size, added)
            progress = check_progress(progress)
        else:
            specials, progress = cls._training_args(vocab_size, special_tokens, progress)
        min_frequency = check_min_frequency(min_frequency)
        trainer = capped_trainer(pattern, max_memory)
        fed = feed_capped(trainer, source, progress, options)
        skipped = skipped_message(fed.skipped)
        if skipped:
            warnings.warn(skipped, stacklevel=2)
        if fed.empty():
            raise ValueError(
                f"the corpus is empty ({fed.describe()}): there is no text to learn merges from"
            )
        if base is not None:
            return cls._learn_on_base(trainer, base, new, extra, progress, min_frequency)
        return cls._learn(trainer, pattern, vocab_size, specials, progress, min_frequency)

    @classmethod
    def _train_sizes(cls, source, sizes, **kw) -> "list[Tokenizer]":
        """``train`` for a list of sizes: the largest, and the others shrunk from it."""
        if not sizes or any(isinstance(v, bool) or not isinstance(v, int) for v in sizes):
            raise TypeError("vocab_size must be an int or a non-empty list of ints")
        base, specials = kw["base"], kw["special_tokens"]
        if base is not None and specials is _DEFAULT_SPECIALS:
            specials = None
        for v in sizes:  # each checked before any training
            if base is not None:
                cls._base_plan(base, v, specials)
            else:
                cls._training_args(v, specials, None)
        largest = cls.train(source, max(sizes), **kw)
        return [largest._resized(v, base, specials) for v in sizes]

    @classmethod
    def train_from_counts(
        cls,
        counts: "Counts | PathLike",
        vocab_size: int,
        *,
        special_tokens: Collection[str] = (ENDOFTEXT,),
        min_frequency: int | None = None,
        progress: bool | None = None,
    ) -> "Tokenizer":
        """:meth:`train` from chunk counts instead of a corpus: a ``bpe.Counts``
        (left as it is) or the path of a ``.bpec`` file (read straight into
        the trainer; the least memory). The pattern is the counts'. The same
        counts give the same tokenizer as :meth:`train` on the corpus counted,
        byte for byte; ``min_frequency`` as for :meth:`train`."""
        specials, progress = cls._training_args(vocab_size, special_tokens, progress)
        trainer, pattern = trainer_for(counts, check_min_frequency(min_frequency))
        return cls._learn(trainer, pattern, vocab_size, specials, progress, 1)

    @staticmethod
    def _training_args(vocab_size, special_tokens, progress) -> tuple[list[str], bool]:
        """The checked special tokens and progress flag of a training."""
        if not isinstance(special_tokens, Iterable):
            raise TypeError(
                f"special_tokens must be a collection of str (() for none), not {type(special_tokens).__name__}"
            )
        specials = check_special_tokens(special_tokens)
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
        # Checked here: the core would refuse it only once the corpus is read.
        return specials, check_progress(progress)

    @classmethod
    def _learn(cls, trainer, pattern, vocab_size, specials, progress, min_frequency) -> "Tokenizer":
        """The merge loop over the trainer's counts, and the tokenizer it makes."""
        target = vocab_size - len(specials)
        # The state, made in Rust while the merge loop runs: {(left, right):
        # new} and {id: bytes}, and with them the encoder for these special
        # tokens (ids after the ordinary ones), which `trainer.encoder` hands over.
        merges, vocab = trainer.train(target, progress, list(specials), min_frequency)
        # The special tokens' ids (after the ordinary ones) are decided by the
        # trainer, which built the encoder with them.
        special_ids = dict(trainer.special_ids())
        n_ordinary = len(vocab)
        if n_ordinary < target:
            warnings.warn(
                f"the corpus ran out of pairs to merge: the vocabulary has "
                f"{n_ordinary + len(specials)} tokens, not the {vocab_size} asked for",
                stacklevel=3,
            )
        tok = cls._trained(vocab, merges, pattern, special_ids, trainer.encoder)
        for s, i in special_ids.items():
            # A few specials: a scan per special is cheaper than a bytes -> id dict.
            b = s.encode("utf-8")
            if (j := next((j for j, t in vocab.items() if t == b), None)) is not None:
                warnings.warn(
                    f"special token {s!r} (id {i}) is also the ordinary token {j}: "
                    f"where it is allowed, text {s!r} becomes the special id, and decoding either id gives "
                    f"the same text; pick a text that does not occur in the corpus, like '<|{s}|>'",
                    stacklevel=3,
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
            return self._core.encode_ordinary(replace_surrogates(text))
        except TypeError:
            _check_text(text)  # names the argument, not the binding's conversion
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
        chance (bpe/dropout.py); reproducible with ``seed`` (an int; None: a
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
                _check_text(text)
                raise
            if type(ids) is str:
                raise disallowed_error(ids)
            return ids
        _check_text(text)
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
        _check_text(text)
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
        _check_text(text)
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

    # -- decoding -----------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a token sequence (may end mid-character). An id that
        is not an int (a bool included) raises ``TypeError``, one out of
        range ``ValueError``, each naming the first such id and its index."""
        if not isinstance(ids, list):
            ids = _ids_list(ids)
        try:
            out = self._core.decode_bytes(ids)
        except (OverflowError, TypeError) as e:
            # The slow path, only on error: name the first bad id and where it is.
            raise self._bad_id(ids, e) from None
        # (A bool is refused by the core: rust/py/lists.rs, ids_of.)
        return out

    def _bad_id(self, ids: list, error: Exception) -> Exception:
        """The error for the first item of ``ids`` that is not a token id."""
        top = self.n_vocab - 1
        for k, i in enumerate(ids):
            if isinstance(i, bool) or not _is_int(i):
                return TypeError(f"token ids must be ints in 0..{top}: ids[{k}] is {i!r}, not an int")
            if not 0 <= i < 2**32:
                return ValueError(f"token ids must be ints in 0..{top}: ids[{k}] is {i!r}")
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
            raise ValueError(f"token id must be an int in 0..{self.n_vocab - 1}, not {id!r}") from None

    # -- files --------------------------------------------------------------

    def save(self, path: PathLike, *, force: bool = False) -> None:
        """Writes the tokenizer to one text file (format in README.md),
        atomically: a crash mid-save leaves the old file, never a partial one.
        A read-only file there is replaced only with ``force`` (bpe/files.py)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or a path, not {type(path).__name__}")
        atomic_write_text(path, self._dumps(), force=force)

    def _dumps(self) -> str:
        """The text of the file :meth:`save` writes."""
        if self._from_merges:
            return fileformat.dumps(self.pattern, self.special_tokens, merges=list(self.merges))
        # A rank vocabulary (e.g. from tiktoken): its ids need not follow
        # the byte-level layout that merge replay assumes, so store the
        # ranks themselves, as .tiktoken files do.
        return fileformat.dumps(self.pattern, self.special_tokens, vocab=self.vocab)

    @classmethod
    def load(cls, path: PathLike) -> "Tokenizer":
        """Reads a file written by :meth:`save`. A missing, truncated,
        corrupted or wrong-version file raises an error naming the file."""
        raw, name = read_file(path)
        return cls._parse(raw, name)

    @classmethod
    def _parse(cls, raw: bytes, name: str) -> "Tokenizer":
        f = fileformat.parse(raw, name)
        try:  # the content: merges that replay, unique tokens, ids in range, ...
            return cls(f.merges, f.pattern, f.special_tokens, ranks=f.ranks)
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            raise TokenizerFileError(f"{name}: corrupted: {e}") from None

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

    __hash__ = None  # mutable state


def _check_text(text) -> None:
    """A ``TypeError`` naming the argument for anything but a str (checked
    before the core, or on the default path after it refused the text)."""
    if not isinstance(text, str):
        hint = "; decode it first (e.g. text.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"text must be a str, not {type(text).__name__}{hint}")


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


def _from_ranks(ranks, pattern, special_tokens) -> Tokenizer:
    return Tokenizer(pattern=pattern, special_tokens=special_tokens, ranks=ranks)
