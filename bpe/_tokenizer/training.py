"""Training: the methods of :class:`bpe.Tokenizer` that learn a vocabulary
from a corpus or from chunk counts (the counting and the merge loop run in
Rust: ``rust/train/``)."""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Collection, Iterable, Sequence, overload

from bpe._tokenizer.picky import Picky, check_prune, replay_events
from bpe._tokenizer.superbpe import STAGE2_PATTERN, SUPERWORD_WORDS, SuperBPE
from bpe._util.patterns import resolve_pattern
from bpe._util.specials import ENDOFTEXT, check_special_tokens
from bpe._util.vocab import MAX_ID, MAX_VOCAB_SIZE
from bpe.counts import Counts, capped_trainer, check_min_frequency, check_progress, feed_capped, trainer_for
from bpe.sources.corpus import Source
from bpe.sources.paths import SourceOptions, skipped_message

if TYPE_CHECKING:
    from bpe._util.files import PathLike
    from bpe.tokenizer import Tokenizer

__all__ = ["Training"]

#: ``train``'s default special tokens, told apart (by identity) from the same
#: tokens given: with ``base=``, the default means the base's own.
_DEFAULT_SPECIALS = (ENDOFTEXT,)


class Training:
    """Mixed into :class:`bpe.Tokenizer`."""

    # For type checkers: one size gives a Tokenizer, a list of sizes a list.
    @overload
    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: int,
        *,
        pattern: str | None = ...,
        digits: str | None = ...,
        special_tokens: Collection[str] = ...,
        progress: bool | None = ...,
        text_field: str = ...,
        skip_bad: bool = ...,
        max_memory: int | str | None = ...,
        min_frequency: int | None = ...,
        base: "Tokenizer | PathLike | None" = ...,
        superbpe: int | None = ...,
        prune: float | None = ...,
    ) -> "Tokenizer": ...

    @overload
    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: Sequence[int],
        *,
        pattern: str | None = ...,
        digits: str | None = ...,
        special_tokens: Collection[str] = ...,
        progress: bool | None = ...,
        text_field: str = ...,
        skip_bad: bool = ...,
        max_memory: int | str | None = ...,
        min_frequency: int | None = ...,
        base: "Tokenizer | PathLike | None" = ...,
        superbpe: int | None = ...,
        prune: float | None = ...,
    ) -> "list[Tokenizer]": ...

    @classmethod
    def train(
        cls,
        source: Source,
        vocab_size: int | Sequence[int],
        *,
        pattern: str | None = None,
        digits: str | None = None,
        special_tokens: Collection[str] = _DEFAULT_SPECIALS,
        progress: bool | None = None,
        text_field: str = "text",
        skip_bad: bool = False,
        max_memory: int | str | None = None,
        min_frequency: int | None = None,
        base: "Tokenizer | PathLike | None" = None,
        superbpe: int | None = None,
        prune: float | None = None,
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
        ``bpe/sources/paths.py``. ``source`` may also be a pyarrow Table or
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
        :meth:`shrink`-ed; see bpe/_tokenizer/reshape.py). ``pattern`` defaults to gpt4;
        ``digits`` ("single" or "r2l3") splits digits first (docs/patterns.md).

        ``base``: extend this tokenizer (a Tokenizer, a tokenizer file, or a
        name such as ``"cl100k"``) instead of starting from bytes: every id
        and merge of it is kept, and only new merges are learned on top, up to
        ``vocab_size`` tokens in all (more than the base's). Its pattern is
        used (a different ``pattern=`` is an error) and its special tokens
        kept, each at its id unless a new token needs that id (then at the
        first free ids after the new tokens); ``special_tokens`` adds more.

        ``superbpe``: train a SuperBPE vocabulary (Liu et al., 2025): ordinary
        BPE up to ``superbpe`` tokens (counted as ``vocab_size`` is), then on
        to ``vocab_size`` with merges that may cross spaces (superwords, at
        most 4 words each); see bpe/_tokenizer/superbpe.py. The corpus is
        read twice, so ``source`` must not be a one-pass iterator.

        ``prune``: train a Picky BPE vocabulary (Chizhov et al., 2024) with
        this threshold in (0, 1], e.g. 0.9: after each merge, a token of the
        pair is removed when the merge used up more than ``prune`` of its
        occurrences (single bytes never are), and ``vocab_size`` counts the
        tokens present at the end; 1 removes nothing (ordinary BPE). See
        bpe/_tokenizer/picky.py and docs/pruning.md.
        """
        options = SourceOptions(text_field=text_field, skip_bad=skip_bad)
        prune = check_prune(prune)
        if prune is not None:
            why = ("base=" if base is not None else "superbpe=" if superbpe is not None
                   else "a list of sizes" if isinstance(vocab_size, (list, tuple)) else None)
            if why:
                raise ValueError(f"prune= trains a Picky BPE vocabulary from bytes, to one size; it does not go "
                                 f"with {why}")
        if superbpe is not None:
            if base is not None:
                raise ValueError("superbpe= trains from bytes; it does not go with base=")
            if isinstance(vocab_size, (list, tuple)):
                return cls._train_sizes(source, list(vocab_size), pattern=resolve_pattern(pattern or "gpt4", digits),
                                        special_tokens=special_tokens, progress=progress, text_field=text_field,
                                        skip_bad=skip_bad, max_memory=max_memory, min_frequency=min_frequency,
                                        base=None, superbpe=superbpe)
            return cls._train_superbpe(source, vocab_size, superbpe, resolve_pattern(pattern or "gpt4", digits),
                                       special_tokens, progress, options, max_memory, min_frequency)
        if base is not None:
            base = cls._as_base(base)
            if (pattern, digits) != (None, None) and resolve_pattern(pattern or "gpt4", digits) != base.pattern:
                raise ValueError("extending with a base whose pattern differs from pattern=: the base's ids hold "
                                 "only under its own pattern; leave pattern= out (the base's is used)")
            pattern, digits = base.pattern, None
        pattern = resolve_pattern(pattern or "gpt4", digits)
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
        if prune is not None:
            return cls._learn_picky(trainer, pattern, vocab_size, specials, progress, min_frequency, prune)
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
    def _train_superbpe(cls, source, vocab_size, transition_size, pattern, special_tokens, progress, options,
                        max_memory, min_frequency) -> "Tokenizer":
        """``train(..., superbpe=transition_size)``: stage 1, then stage 2 on
        counts made with the stage-2 pattern (bpe/_tokenizer/superbpe.py)."""
        specials, progress = cls._training_args(vocab_size, special_tokens, progress)
        if isinstance(transition_size, bool) or not isinstance(transition_size, int):
            raise TypeError(f"superbpe must be an int (the vocabulary size of stage 1), not "
                            f"{type(transition_size).__name__}")
        if not 256 + len(specials) <= transition_size < vocab_size:
            raise ValueError(f"superbpe={transition_size} must be at least {256 + len(specials)} and below "
                             f"vocab_size {vocab_size}: stage 1 trains to it, stage 2 from it to vocab_size")
        if not isinstance(source, (str, bytes, os.PathLike)) and iter(source) is source:
            raise ValueError("superbpe= reads the corpus twice (once per stage): give texts, paths or a list of "
                             "them, not a one-pass iterator")
        stage1 = cls.train(source, transition_size, pattern=pattern, special_tokens=specials, progress=progress,
                           text_field=options.text_field, skip_bad=options.skip_bad, max_memory=max_memory,
                           min_frequency=min_frequency)
        span = max(stage1.vocab) + 1  # the first id of stage 2
        tokens = [stage1.vocab.get(i, b"") for i in range(span)]
        trainer = capped_trainer(STAGE2_PATTERN, max_memory)
        # Each stage-2 chunk counted under the ids stage 1 encodes it to, as
        # it is read: these chunks are sentences, nearly all distinct, so
        # counting their bytes kept the corpus twice (rust/train/ids.rs).
        trainer.count_by_ids(stage1._core, tokens)
        feed_capped(trainer, source, progress, options)
        target = vocab_size - len(specials)
        learnt = trainer.extend(stage1._core, tokens, target, progress, check_min_frequency(min_frequency),
                                SUPERWORD_WORDS)
        vocab, merges = dict(stage1.vocab), dict(stage1.merges)
        for left, right, made in learnt:
            if made not in vocab:  # (else a merge that made a token again)
                vocab[made] = vocab[left] + vocab[right]
            merges[(left, right)] = made
        end = max(vocab) + 1
        if end < target:
            warnings.warn(f"the corpus ran out of pairs to merge: the vocabulary has {end + len(specials)} tokens, "
                          f"not the {vocab_size} asked for", stacklevel=3)
        placed = {s: end + k for k, s in enumerate(specials)}
        return cls._trained(vocab, merges, STAGE2_PATTERN, placed, None, SuperBPE(span, stage1.pattern))

    @classmethod
    def train_from_counts(
        cls,
        counts: "Counts | PathLike",
        vocab_size: int,
        *,
        special_tokens: Collection[str] = (ENDOFTEXT,),
        min_frequency: int | None = None,
        progress: bool | None = None,
        prune: float | None = None,
    ) -> "Tokenizer":
        """:meth:`train` from chunk counts instead of a corpus: a ``bpe.Counts``
        (left as it is) or the path of a ``.bpec`` file (read straight into
        the trainer; the least memory). The pattern is the counts'. The same
        counts give the same tokenizer as :meth:`train` on the corpus counted,
        byte for byte; ``min_frequency`` and ``prune`` as for :meth:`train`."""
        specials, progress = cls._training_args(vocab_size, special_tokens, progress)
        prune = check_prune(prune)
        trainer, pattern = trainer_for(counts, check_min_frequency(min_frequency))
        if prune is not None:
            return cls._learn_picky(trainer, pattern, vocab_size, specials, progress, 1, prune)
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


    @classmethod
    def _learn_picky(cls, trainer, pattern, vocab_size, specials, progress, min_frequency, prune) -> "Tokenizer":
        """The Picky BPE loop over the trainer's counts (``rust/train/picky.rs``),
        and the tokenizer its events make (bpe/_tokenizer/picky.py)."""
        target = vocab_size - len(specials)
        learnt = trainer.train_picky(target, prune, progress, min_frequency)
        events = tuple((e[0], e[1]) if len(e) == 3 else (e[0],) for e in learnt)
        picky = Picky(events, prune)
        vocab = replay_events(events).vocab
        if len(vocab) < target:
            warnings.warn(f"the corpus ran out of pairs to merge: the vocabulary has {len(vocab) + len(specials)} "
                          f"tokens, not the {vocab_size} asked for", stacklevel=3)
        placed = {s: len(vocab) + k for k, s in enumerate(specials)}
        return cls._trained(vocab, None, pattern, placed, None, None, picky)
