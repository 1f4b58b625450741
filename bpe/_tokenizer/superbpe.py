"""SuperBPE (Liu et al., 2025, "SuperBPE: Space Travel for Language Models",
arXiv 2503.13423): a vocabulary learned in two stages. Stage 1 is ordinary
BPE up to a transition size, within the chunks of an ordinary split pattern
(subwords). Stage 2 goes on from there within the chunks of a relaxed
pattern that no longer cuts at spaces (superwords such as " by the way"),
on counts made again from the corpus.

What the paper's trainer does, and this one too:

- stage 2's chunks: its training script's split, "isolated" (the matches
  and the text between them are the chunks): numbers of 1 to 3 digits, runs
  of two or more punctuation marks (with an optional space before and
  newlines or slashes after), and runs of spaces but the last before a
  word; everything else (words, single spaces, single punctuation marks,
  newlines) stays together (:data:`STAGE2_PATTERN`);
- each stage-2 chunk starts as stage 1 encodes it whole, and the merge loop
  goes on from there (``Trainer.extend``);
- a stage-2 merge is never made if its token would span more than 4 words
  (runs of bytes between spaces) or hold ": " (``rust/train/mod.rs``,
  ``superword_allowed``).

Encoding splits text with the stage-2 pattern and encodes each chunk by BPE
with the merge list over the whole chunk (``rust/encode/superword.rs``; the
oracle is ``bpe/reference.py``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["STAGE2_PATTERN", "SUPERWORD_WORDS", "SuperBPE", "refuse"]

#: The paper's stage-2 split, as a pattern whose matches are its chunks:
#: its regex's matches, and (last alternative) the runs of text before the
#: next match.
STAGE2_PATTERN = (
    r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"
    r"|(?:(?!\p{N}| ?[^\s\p{L}\p{N}]{2,}| +(?!\S))[\s\S])+"
)

#: The most words a stage-2 token may span.
SUPERWORD_WORDS = 4


class SuperBPE(NamedTuple):
    """A SuperBPE vocabulary's first stage: ``transition``, the first id of
    the second stage (the first stage's ordinary tokens are ids 0 to
    ``transition - 1``), and ``pattern``, the first stage's split pattern.
    The tokenizer's own ``pattern`` is the second stage's."""

    transition: int
    pattern: str


def refuse(what: str) -> ValueError:
    """The error of an export or a way of encoding that a SuperBPE vocabulary
    cannot take."""
    return ValueError(
        f"{what} cannot hold a SuperBPE vocabulary: it is encoded by BPE with its merge list over long "
        f"chunks, and ranks (tiktoken's form) encode some of those chunks otherwise; export it with "
        f"save_huggingface or save_pretrained (tokenizer.json holds the merge list), or Tokenizer.save"
    )
