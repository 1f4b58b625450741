"""The Tokenizer: a byte-level BPE vocabulary you can train, use, save and load.

Its whole state is four fields, as in minbpe:

    merges          {(left_id, right_id): new_id}, in the order they were learned
    vocab           {id: bytes}, derived: ids 0..255 are single bytes, each merge
                    adds vocab[left] + vocab[right]
    pattern         the split regex (chunks are never merged across)
    special_tokens  {text: id}, taking the ids after the ordinary tokens

Everything that loops over text runs in the Rust core (``bpe._core``). This
file holds the class and its state (construction, saving, loading, pickling);
its methods by topic are mixed in from ``bpe/_tokenizer/``: training,
encoding, decoding, bulk encoding, budgets, offsets, dropout, reshaping and
the interchange with tiktoken, HuggingFace and transformers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Iterable, Sequence

from bpe import _core
from bpe._tokenizer.budgets import Budgets
from bpe._tokenizer.bulk import BulkEncoding
from bpe._tokenizer.decoding import Decoders
from bpe._tokenizer.dropout import Dropout
from bpe._tokenizer.encoding import Encoders
from bpe._tokenizer.interop import Interop
from bpe._tokenizer.offsets import Measuring
from bpe._tokenizer.picky import Picky, check_picky, replay_events
from bpe._tokenizer.pretrained import Pretrained
from bpe._tokenizer.reshape import Reshaping
from bpe._tokenizer.superbpe import SuperBPE
from bpe._tokenizer.tiktoken_api import TiktokenSurface
from bpe._tokenizer.training import Training
from bpe._util.files import PathLike, atomic_write_text
from bpe._util.patterns import pattern_name, resolve_pattern
from bpe._util.specials import check_assigned
from bpe._util.vocab import check_id_range, replay, vocab_from_ranks
from bpe.formats import bpefile
from bpe.formats.bpefile import TokenizerFileError, read_file

__all__ = ["Tokenizer"]


class Tokenizer(Training, Encoders, Decoders, TiktokenSurface, BulkEncoding, Budgets, Measuring, Dropout, Reshaping,
                Interop, Pretrained):
    """A byte-level BPE tokenizer. Build one with :meth:`train` or :meth:`load`."""

    def __init__(
        self,
        merges: dict[tuple[int, int], int] | Sequence[tuple[int, int]] = (),
        pattern: str = "gpt4",
        special_tokens: dict[str, int] | None = None,
        *,
        ranks: dict[bytes, int] | None = None,
        superbpe: SuperBPE | tuple[int, str] | None = None,
        picky: Picky | tuple | None = None,
    ):
        """Build from a merge list or from ranks.

        ``merges``: ``{(left, right): new}`` in learning order, or just the
        ``(left, right)`` pairs in order (new ids are then assigned as training
        does: the next free id, or the existing id of identical bytes). Ids
        0..255 are the single bytes.

        ``ranks``: instead of merges, a tiktoken-style ``{token bytes: rank}``
        (ids are the ranks; they may have holes). The merge list is recovered
        from the ranks when something needs it (see :attr:`merges`).

        ``superbpe``: ``(transition, stage-1 pattern)`` for a SuperBPE
        vocabulary (``bpe/_tokenizer/superbpe.py``; ``pattern`` is then the
        second stage's); it needs ``merges``.

        ``picky``: ``(events, prune)`` for a Picky BPE vocabulary
        (``bpe/_tokenizer/picky.py``), in place of ``merges`` and ``ranks``.
        """
        self.pattern = resolve_pattern(pattern)
        if not isinstance(merges, Iterable):
            raise TypeError(f"merges must be a dict {{(left, right): new}} or a list of (left, right) pairs, "
                            f"not {type(merges).__name__}")
        if special_tokens is not None and not isinstance(special_tokens, Mapping):
            raise TypeError(
                f"special_tokens must be a dict {{text: id}} (or None), not {type(special_tokens).__name__}"
            )
        self.picky = None if picky is None else check_picky(picky)
        engine = None
        if self.picky is not None:
            if merges or ranks is not None or superbpe is not None:
                raise ValueError("a Picky vocabulary is its events: give picky= alone, not merges, ranks or superbpe")
            # Replayed once (seconds at 200k): the vocabulary, the removed
            # tokens and the encoder's events all come from it.
            replayed = replay_events(self.picky.events)
            self.vocab, self._merges, self._removed, engine = replayed.vocab, None, replayed.removed, replayed.engine
            del replayed
        elif ranks is not None:
            if not isinstance(ranks, Mapping):
                raise TypeError(f"ranks must be a dict {{token bytes: rank}} (or None), not {type(ranks).__name__}")
            if merges:
                raise ValueError("give merges or ranks, not both")
            self.vocab = vocab_from_ranks(ranks)
            self._merges: dict[tuple[int, int], int] | None = None  # recovered on demand
        else:
            self.vocab, self._merges = replay(merges)
        self._from_merges = ranks is None and self.picky is None
        self.superbpe = self._check_superbpe(superbpe)
        self._set_special_tokens_and_core(special_tokens, picky_engine=engine)

    def _check_superbpe(self, superbpe) -> SuperBPE | None:
        """``superbpe=`` of the constructor, checked against the vocabulary."""
        if superbpe is None:
            return None
        if not self._from_merges:
            raise ValueError("a SuperBPE vocabulary is encoded with its merge list: give merges, not ranks")
        try:
            transition, pattern = superbpe
        except (TypeError, ValueError):
            raise TypeError("superbpe must be (transition, stage-1 pattern)") from None
        if isinstance(transition, bool) or not isinstance(transition, int):
            raise TypeError(f"superbpe's transition must be an int (an id), not {type(transition).__name__}")
        top = max(self.vocab) + 1
        if not 256 <= transition <= top:
            raise ValueError(f"superbpe's transition {transition} is not an id of this vocabulary (256..{top})")
        return SuperBPE(transition, resolve_pattern(pattern))

    @classmethod
    def _trained(cls, vocab, merges, pattern, special_tokens, make_core, superbpe=None, picky=None) -> "Tokenizer":
        """A Tokenizer from the trainer's own output (vocab and merges
        consistent by construction), skipping the merge replay of __init__;
        ``make_core(special_tokens)`` builds the encoder."""
        self = cls.__new__(cls)
        self.pattern, self.vocab, self._merges, self._from_merges = pattern, vocab, merges, picky is None
        self.superbpe, self.picky = superbpe, picky
        self._removed = None  # replayed from the events if asked for
        self._set_special_tokens_and_core(special_tokens, make_core)
        return self

    def _set_special_tokens_and_core(self, special_tokens, make_core=None, picky_engine=None) -> None:
        """``picky_engine``: a Picky vocabulary's events for the encoder, as
        ``replay_events`` made them (the constructor's replay)."""
        self.special_tokens: dict[str, int] = check_assigned(special_tokens, self.vocab)
        check_id_range(self.vocab, self.special_tokens)
        if make_core is None and self.picky is not None:
            if picky_engine is None:
                picky_engine = replay_events(self.picky.events).engine
            self._core = _core.CoreBPE(self._ranks(), self.special_tokens, self.pattern, picky=picky_engine)
        elif make_core is None and self.superbpe is not None:
            merges = [(left, right, new) for (left, right), new in self._merges.items()]
            stages = (self.superbpe.pattern, self.superbpe.transition, merges)
            self._core = _core.CoreBPE(self._ranks(), self.special_tokens, self.pattern, stages)
        elif make_core is None:
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
        if self.picky is not None:
            raise ValueError("a Picky BPE vocabulary has no merge list: it is its merges and removals in order "
                             "(Tokenizer.picky.events)")
        if self._merges is None:
            self._merges = {(l, r): n for l, r, n in self._core.recover_merges()}
        return self._merges

    @property
    def removed_tokens(self) -> list[bytes]:
        """A Picky BPE vocabulary's removed tokens (removed during training
        and not made again; :attr:`picky`), in the order they were first
        made; ``[]`` for any other vocabulary."""
        if self.picky is None:
            return []
        if self._removed is None:
            self._removed = replay_events(self.picky.events).removed
        return list(self._removed)

    def _ranks(self) -> dict[bytes, int]:
        return {b: i for i, b in self.vocab.items()}

    # -- state --------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        """Number of ids: one more than the largest id."""
        return max([*self.vocab, *self.special_tokens.values()]) + 1

    @property
    def special_tokens_set(self) -> set[str]:
        """The texts of the special tokens, as a set (tiktoken's name)."""
        return set(self.special_tokens)

    def __repr__(self) -> str:
        if self.superbpe is not None:  # the first stage's pattern; the second's is SuperBPE's own
            name = f"{pattern_name(self.superbpe.pattern) or 'custom'} superbpe={self.superbpe.transition}"
        else:
            name = pattern_name(self.pattern) or "custom"
        return f"<Tokenizer n_vocab={self.n_vocab} pattern={name} special_tokens={list(self.special_tokens)}>"

    # -- files --------------------------------------------------------------

    def save(self, path: PathLike, *, force: bool = False) -> None:
        """Writes the tokenizer to one text file (its format: docs/formats.md#the-tokenizer-file-bpe),
        atomically: a crash mid-save leaves the old file, never a partial one.
        A read-only file there is replaced only with ``force`` (bpe/_util/files.py)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or a path, not {type(path).__name__}")
        atomic_write_text(path, self._dumps(), force=force)

    def _dumps(self) -> str:
        """The text of the file :meth:`save` writes."""
        if self.picky is not None:
            return bpefile.dumps(self.pattern, self.special_tokens, picky=self.picky)
        if self._from_merges:
            return bpefile.dumps(self.pattern, self.special_tokens, merges=list(self.merges),
                                 superbpe=None if self.superbpe is None else tuple(self.superbpe))
        # A rank vocabulary (e.g. from tiktoken): its ids need not follow
        # the byte-level layout that merge replay assumes, so store the
        # ranks themselves, as .tiktoken files do.
        return bpefile.dumps(self.pattern, self.special_tokens, vocab=self.vocab)

    @classmethod
    def load(cls, path: PathLike) -> "Tokenizer":
        """Reads a file written by :meth:`save`. A missing, truncated,
        corrupted or wrong-version file raises an error naming the file."""
        raw, name = read_file(path)
        tok = cls._parse(raw, name)
        tok.name = os.path.splitext(os.path.basename(name))[0]
        return tok

    @classmethod
    def _parse(cls, raw: bytes, name: str) -> "Tokenizer":
        f = bpefile.parse(raw, name)
        try:  # the content: merges that replay, unique tokens, ids in range, ...
            if f.picky is not None:
                return cls(pattern=f.pattern, special_tokens=f.special_tokens, picky=f.picky)
            return cls(f.merges, f.pattern, f.special_tokens, ranks=f.ranks, superbpe=f.superbpe)
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            raise TokenizerFileError(f"{name}: corrupted: {e}") from None

    # -- pickling (DataLoader workers, multiprocessing) ---------------------

    def __reduce__(self):
        # The name goes too, when one was given (the default is derived).
        state = {"_name": self._name} if self.__dict__.get("_name") is not None else None
        if self.picky is not None:
            return (_picky, (tuple(self.picky), self.pattern, self.special_tokens), state)
        if self.superbpe is not None:
            return (_superbpe, (self.merges, self.pattern, self.special_tokens, tuple(self.superbpe)), state)
        if self._from_merges:
            return (Tokenizer, (self.merges, self.pattern, self.special_tokens), state)
        return (_from_ranks, (self._ranks(), self.pattern, self.special_tokens), state)

    def __eq__(self, other) -> bool:
        # The vocabulary (with its ids), the pattern and the special tokens
        # determine every encoding.
        return (
            isinstance(other, Tokenizer)
            and self.vocab == other.vocab
            and self.pattern == other.pattern
            and self.special_tokens == other.special_tokens
            and self.superbpe == other.superbpe
            and self.picky == other.picky
        )

    __hash__ = None  # mutable state


def _superbpe(merges, pattern, special_tokens, superbpe) -> Tokenizer:
    return Tokenizer(merges, pattern, special_tokens, superbpe=superbpe)


def _picky(picky, pattern, special_tokens) -> Tokenizer:
    return Tokenizer(pattern=pattern, special_tokens=special_tokens, picky=picky)


def _from_ranks(ranks, pattern, special_tokens) -> Tokenizer:
    return Tokenizer(pattern=pattern, special_tokens=special_tokens, ranks=ranks)
