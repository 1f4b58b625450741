"""Reshaping a vocabulary: extending one with new merges, shrinking one to
its first ids, and adding special tokens. The methods of :class:`bpe.Tokenizer`
that make a new Tokenizer from an existing one.

Why these hold exactly:

* Extending keeps every id of the base: the corpus is cut with the base's
  pattern, each chunk starts as the ids the base encodes it to, and the
  merge loop goes on from there, giving new tokens the ids after the base's
  (``train::extend_merges`` in Rust). The encoder merges by rank, lowest
  first, and every new token ranks above every base token, so on any chunk
  it first makes the base's ids and only then the new merges: text that no
  new merge touches gets exactly the base's ids.
* Merges are learned in a fixed order that does not depend on the size
  asked for, so training to n ordinary tokens learns a prefix of the merges
  training to more learns: ``shrink(n)`` keeps that prefix, and the special
  tokens go right after it, as training puts them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TypeVar

from bpe._tokenizer.picky import refuse
from bpe._util.specials import check_assigned, check_special_tokens
from bpe.formats.specs import load_spec

# The Tokenizer class these methods are mixed into (this module cannot
# import bpe.tokenizer, which imports it).
T = TypeVar("T", bound="Reshaping")


class Reshaping:
    """Mixed into :class:`bpe.Tokenizer`."""

    # -- special tokens -----------------------------------------------------

    def with_special_tokens(self: T, tokens) -> T:
        """A new Tokenizer with ``tokens`` added to the special tokens: a dict
        ``{text: id}``, or a list of texts, which take the next free ids
        (from ``n_vocab`` on, in the order given). An id that an ordinary or
        special token has already, or a text that is a special token
        already, raises ``ValueError``."""
        if isinstance(tokens, Mapping):
            added = dict(tokens)
        elif isinstance(tokens, str) or not _iterable(tokens):
            raise TypeError(
                f"tokens must be a dict {{text: id}} or a list of texts, not {type(tokens).__name__}"
                + (f"; for one token write [{tokens!r}]" if isinstance(tokens, str) else "")
            )
        else:
            names = check_special_tokens(list(tokens))
            added = {s: self.n_vocab + k for k, s in enumerate(names)}
        again = sorted(s for s in added if s in self.special_tokens)
        if again:
            raise ValueError(f"{again[0]!r} is a special token already (id {self.special_tokens[again[0]]})")
        taken = {i: s for s, i in self.special_tokens.items()}
        for s, i in added.items():
            if isinstance(i, int) and not isinstance(i, bool) and i in taken:
                raise ValueError(f"special token {s!r} would take id {i}, which the special token {taken[i]!r} has")
            if isinstance(i, int) and i in self.vocab:
                raise ValueError(
                    f"special token {s!r} would take id {i}, which the ordinary token {self.vocab[i]!r} has; "
                    f"pick an id from {self.n_vocab} on, or give a list of names for the next free ids"
                )
        specials = check_assigned({**self.special_tokens, **added}, self.vocab)
        return self._remade(dict(self.vocab), specials)

    # -- shrinking ----------------------------------------------------------

    def shrink(self: T, vocab_size: int | None = None, *, ordinary_tokens: int | None = None) -> T:
        """A new Tokenizer of ``vocab_size`` ids in all, special tokens
        included, as :meth:`train` counts them: the first ``vocab_size - S``
        ordinary ids (the 256 bytes and the first merges; S special tokens)
        and the special tokens right after them, in the order of their ids,
        as training puts them. For a trained tokenizer this is the tokenizer
        that training to ``vocab_size`` gives, byte for byte.

        ``ordinary_tokens=n`` instead keeps the first ``n`` ordinary ids
        (then ``vocab_size`` is ``n + S``)."""
        specials = len(self.special_tokens)
        if (vocab_size is None) == (ordinary_tokens is None):
            raise TypeError("shrink takes vocab_size (all ids, special tokens included) or ordinary_tokens=, "
                            "one of the two")
        value, what = (vocab_size, "vocab_size") if vocab_size is not None else (ordinary_tokens, "ordinary_tokens")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{what} must be an int, not {type(value).__name__}")
        n = value - specials if vocab_size is not None else value
        top = max(self.vocab) + 1
        low, high = (256 + specials, top + specials) if vocab_size is not None else (256, top)
        if n < 256:
            raise ValueError(f"cannot shrink to {what} {value}: a byte-level vocabulary keeps the 256 single bytes"
                             + (f" and the {specials} special tokens" if vocab_size is not None and specials else "")
                             + f", so {what} must be at least {low}")
        if n > top:
            raise ValueError(f"cannot shrink to {what} {value}: this vocabulary has {top} ordinary tokens"
                             + (f" and {specials} special" if vocab_size is not None else "")
                             + f"; {what} must be at most {high}")
        vocab = {i: b for i, b in self.vocab.items() if i < n}
        order = sorted(self.special_tokens.items(), key=lambda item: item[1])
        placed = {s: n + k for k, (s, _) in enumerate(order)}
        return self._remade(vocab, placed)

    def _resized(self: T, vocab_size: int, base, special_tokens) -> T:
        """This tokenizer, trained to a larger size, as training to
        ``vocab_size`` (on ``base``, if given) would have made it."""
        top = max(self.vocab) + 1
        if base is None:
            return self.shrink(ordinary_tokens=min(vocab_size - len(self.special_tokens), top))
        new, extra = self._base_plan(base, vocab_size, special_tokens)
        span = max(base.vocab) + 1
        n = min(span + new, top)
        vocab = {i: b for i, b in self.vocab.items() if i < n}
        return self._remade(vocab, _placed(base.special_tokens, span, n, extra))

    def _remade(self: T, vocab: dict[int, bytes], specials: dict[str, int]) -> T:
        """A Tokenizer of this kind (merges or ranks) with this pattern, the
        ordinary tokens ``vocab`` (this one's, or its first ``n``) and
        ``specials``."""
        if self.picky is not None:
            if len(vocab) != len(self.vocab):
                raise refuse("shrinking")
            return type(self)._trained(vocab, None, self.pattern, specials, None, None, self.picky)
        if not self._from_merges:
            return type(self)(pattern=self.pattern, special_tokens=specials,
                              ranks={b: i for i, b in vocab.items()})
        superbpe, pattern = self.superbpe, self.pattern
        if superbpe is not None and max(vocab) < superbpe.transition:
            # Cut back into the first stage: ordinary BPE with its pattern.
            superbpe, pattern = None, superbpe.pattern
        if len(vocab) == len(self.vocab):
            merges = dict(self.merges)
        else:
            # The merges that made the tokens kept: the prefix up to the one
            # that made the last (with any that made an earlier token again).
            merges, last = {}, max(vocab)
            if last >= 256:
                for pair, new in self.merges.items():
                    merges[pair] = new
                    if new == last:
                        break
        return type(self)._trained(vocab, merges, pattern, specials, None, superbpe)

    # -- extending ----------------------------------------------------------

    @classmethod
    def _as_base(cls: type[T], base) -> T:
        """``base=`` of ``train``: a Tokenizer, or what ``-t`` takes (a
        tokenizer file, or a name such as ``cl100k``)."""
        if isinstance(base, (str, os.PathLike)):
            base = load_spec(cls, os.fspath(base))
        if not isinstance(base, cls):
            raise TypeError(f"base must be a Tokenizer, a tokenizer file or a name such as 'cl100k', "
                            f"not {type(base).__name__}")
        if base.picky is not None:
            raise refuse("extending (base=)")
        if base.superbpe is not None:
            raise ValueError("extending a SuperBPE vocabulary is not supported: train it again with a larger "
                             "vocab_size (superbpe= keeps its transition)")
        return base

    @staticmethod
    def _base_plan(base, vocab_size: int, special_tokens) -> tuple[int, list[str]]:
        """How many merges to learn on top of ``base`` for ``vocab_size``
        tokens in all, and the special tokens to add to the base's."""
        specials = [] if special_tokens is None else check_special_tokens(special_tokens)
        extra = [s for s in specials if s not in base.special_tokens]
        size = len(base.vocab) + len(base.special_tokens)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
        new = vocab_size - size - len(extra)
        if new <= 0:
            raise ValueError(
                f"vocab_size {vocab_size} is not above the base's {size} tokens"
                + (f" and {len(extra)} added special tokens" if extra else "")
                + f": ask for more (e.g. {size + len(extra) + 1000} for 1000 new merges)"
            )
        return new, extra

    @classmethod
    def _learn_on_base(cls: type[T], trainer, base, new: int, extra: list[str], progress: bool,
                       min_frequency: int) -> T:
        """Learns ``new`` merges over the counts in ``trainer`` on top of
        ``base``; the Tokenizer they make."""
        span = max(base.vocab) + 1  # new tokens take the ids from here
        tokens = [base.vocab.get(i, b"") for i in range(span)]
        learnt = trainer.extend(base._core, tokens, span + new, progress, min_frequency)
        vocab = dict(base.vocab)
        for left, right, made in learnt:
            if made not in vocab:  # (else a merge that made a base token again)
                vocab[made] = vocab[left] + vocab[right]
        end = max(vocab) + 1
        if end - span < new:
            warnings.warn(f"the corpus ran out of pairs to merge: {end - span} new tokens, not the {new} asked for",
                          stacklevel=4)
        specials = _placed(base.special_tokens, span, end, extra)
        if base._from_merges:
            merges = {**base.merges, **{(left, right): made for left, right, made in learnt}}
            return cls._trained(vocab, merges, base.pattern, specials, None)
        return cls(pattern=base.pattern, special_tokens=specials, ranks={b: i for i, b in vocab.items()})


def _placed(base_specials: dict[str, int], span: int, end: int, extra: list[str]) -> dict[str, int]:
    """The special tokens of an extended vocabulary, whose new tokens took
    ids ``span .. end-1``: each of the base's keeps its id unless a new token
    took it; those that lost theirs take the first free ids from ``end`` on,
    in the order of their old ids, and the ``extra`` ones come after."""
    kept = {s: i for s, i in base_specials.items() if not span <= i < end}
    moved = [s for s, i in sorted(base_specials.items(), key=lambda item: item[1]) if s not in kept]
    taken, out, i = set(kept.values()), dict(kept), end
    for s in [*moved, *extra]:
        while i in taken:
            i += 1
        out[s] = i
        taken.add(i)
    return out


def _iterable(x) -> bool:
    try:
        iter(x)
    except TypeError:
        return False
    return True
