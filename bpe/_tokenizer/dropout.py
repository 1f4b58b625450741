"""BPE-dropout (Provilkov et al., 2020, "BPE-Dropout: Simple and Effective
Subword Regularization"): while a chunk is merged, each candidate merge is
skipped with probability ``p`` at every step, so one text gets many
segmentations (all of which decode back to it) and a model trained on them
sees the pieces of its words. Used when making training data only; ``p``
around 0.1 is the paper's choice.

The merge loop is a separate, slower path in Rust (``Encoder::encode_dropout``
in ``rust/encode/extra.rs``): no chunk cache and no whole-chunk look-up
(both would skip the draws). Ordinary ``encode`` does not change, and
``dropout=0`` *is* ordinary ``encode``.
"""

from __future__ import annotations

import os

from bpe.sources.corpus import replace_surrogates


def check_dropout(dropout, seed) -> tuple[float, int]:
    """``dropout`` as a float in (0, 1) and ``seed`` as a 64-bit seed (a
    fresh random one for None)."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(f"dropout must be a number in [0, 1), not {type(dropout).__name__}")
    if not 0 <= dropout < 1:  # (NaN fails this too)
        raise ValueError(f"dropout must be at least 0 and below 1 (the chance of skipping a merge), got {dropout}")
    if seed is None:
        return float(dropout), int.from_bytes(os.urandom(8), "little")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int (or None for a random one), not {type(seed).__name__}")
    return float(dropout), seed % (1 << 64)  # any int; negative ones too


class Dropout:
    """Mixed into :class:`bpe.Tokenizer`."""

    def _encode_dropout(self, text, allowed_special, disallowed_special, dropout, seed, num_threads) -> list[int]:
        """``encode(text, dropout=p, seed=s)`` for p > 0 (``encode`` checks
        nothing else before it hands over)."""
        p, seed = check_dropout(dropout, seed)
        if self.picky is not None:
            raise ValueError("dropout skips merges of a merge list, and a Picky BPE vocabulary is encoded by "
                             "replaying its merges and removals: it has no dropout")
        if self.superbpe is not None:
            raise ValueError("dropout skips merges of ranked BPE over ordinary chunks; a SuperBPE vocabulary is "
                             "encoded with its merge list over long chunks: it has no dropout")
        if num_threads != 1:
            raise ValueError("dropout encodes on one thread (its draws run in text order): leave num_threads out")
        allowed = self._policy(text, allowed_special, disallowed_special)
        try:
            return self._core.encode_dropout(text, allowed, p, seed)
        except UnicodeEncodeError:
            return self._core.encode_dropout(replace_surrogates(text), allowed, p, seed)
