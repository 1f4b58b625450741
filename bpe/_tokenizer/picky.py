"""Picky BPE (Chizhov et al., 2024, "BPE Gets Picky: Efficient Vocabulary
Refinement During Tokenizer Training", arXiv 2409.04599): BPE that removes
intermediate tokens during training. After each merge of ``(a, b)``, ``a``
and then ``b`` is removed if the merge used up more than ``prune`` of its
occurrences (its Intersection over Self, ``f / (freq + f)``, ``f`` the
occurrences merged and ``freq`` those left), unless it is a single byte.
A removed token's occurrences are split into its parts; a later merge that
makes its bytes again restores it. ``vocab_size`` counts the tokens present
at the end (``rust/train/picky.rs``).

The vocabulary is its events in order (:class:`Picky`), in *training ids*:
``(left, right)`` merges two present tokens (the token of their bytes takes
the next training id if its bytes are new, else keeps its id: made again or
restored), ``(token,)`` removes a token, splitting it into the pair it was
first made of, each part split further while it is itself removed.

The tokenizer's ids are compact: the present tokens in training-id order
(the 256 bytes first, so with no removal the ids are ordinary BPE's), then
the special tokens. Removed tokens have no id; the encoder
(``rust/encode/events.rs``) names them above ``MAX_ID`` and never outputs
them. Encoding replays the events in order on each chunk (a chunk that is a
present token whole is that token, as the paper's encoder has it); the
oracle is ``bpe/reference.py``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from bpe._util.vocab import MAX_ID

__all__ = ["Picky", "Replayed", "check_picky", "check_prune", "replay_events", "refuse"]


class Picky(NamedTuple):
    """A Picky BPE vocabulary: ``events`` in order, ``(left, right)`` for a
    merge and ``(token,)`` for a removal, in training ids (see the module's
    doc), and ``prune``, the threshold it was trained with (None if unknown)."""

    events: tuple[tuple[int, ...], ...]
    prune: float | None


class Replayed(NamedTuple):
    """What the events make: ``vocab`` ``{id: bytes}`` of the present tokens
    (compact ids), ``removed`` the bytes of the tokens removed and not made
    again (in training-id order), ``engine`` the events for the encoder
    (``(0, [left, right, new])``, ``(1, [token, parts...])``, in its ids),
    and ``removals`` the number of removal events."""

    vocab: dict[int, bytes]
    removed: list[bytes]
    engine: list[tuple[int, list[int]]]
    removals: int


def check_prune(prune) -> float | None:
    """``prune=`` of training: None (or 1: no token is ever removed) for
    ordinary BPE, else a float in (0, 1)."""
    if prune is None:
        return None
    if isinstance(prune, bool) or not isinstance(prune, (int, float)):
        raise TypeError(f"prune must be a number in (0, 1] (e.g. 0.9), not {type(prune).__name__}")
    if not (math.isfinite(prune) and 0 < prune <= 1):
        raise ValueError(f"prune={prune} is out of range: it must be above 0 and at most 1 (1: no token removed)")
    return None if prune == 1 else float(prune)


def replay_events(events) -> Replayed:
    """Replays ``events`` (see :class:`Picky`), checking each: a merge of
    two present tokens, a removal of a present token that is not a byte.
    ``ValueError`` names the first event that is not."""
    tokens: list[bytes] = [bytes([b]) for b in range(256)]
    id_of: dict[bytes, int] = {t: i for i, t in enumerate(tokens)}
    made_of: dict[int, tuple[int, int]] = {}
    present = [True] * 256
    internal: list[tuple[int, list[int]]] = []  # in training ids

    def parts(x: int, out: list[int]) -> None:
        stack = [x]
        while stack:
            t = stack.pop()
            if t < 256 or present[t]:
                out.append(t)
            else:
                left, right = made_of[t]
                stack += (right, left)

    for k, event in enumerate(events):
        if not isinstance(event, tuple) or len(event) not in (1, 2) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in event
        ):
            raise ValueError(f"event {k} is {event!r}: not (left, right) nor (token,)")
        if any(not 0 <= i < len(tokens) or not present[i] for i in event):
            raise ValueError(f"event {k} {event!r} names a token that is not present")
        if len(event) == 2:
            left, right = event
            made = tokens[left] + tokens[right]
            new = id_of.get(made)
            if new is None:
                new = len(tokens)
                tokens.append(made)
                id_of[made] = new
                made_of[new] = (left, right)
                present.append(True)
            present[new] = True
            internal.append((0, [left, right, new]))
        else:
            (x,) = event
            if x < 256:
                raise ValueError(f"event {k} removes the byte {x}: single bytes are never removed")
            present[x] = False
            split: list[int] = []
            parts(x, split)
            internal.append((1, [x, *split]))
    kept = [i for i in range(len(tokens)) if present[i]]
    if len(kept) > MAX_ID + 1:
        raise ValueError(f"the events make {len(kept)} tokens; ids must be at most {MAX_ID}")
    ids = {t: i for i, t in enumerate(kept)}
    gone = [t for t in range(len(tokens)) if not present[t]]
    ids.update({t: MAX_ID + 1 + k for k, t in enumerate(gone)})
    engine = [(kind, [ids[i] for i in event]) for kind, event in internal]
    return Replayed(
        vocab={ids[t]: tokens[t] for t in kept},
        removed=[tokens[t] for t in gone],
        engine=engine,
        removals=sum(kind for kind, _ in internal),
    )


def check_picky(picky) -> Picky:
    """``picky=`` of the constructor: a :class:`Picky` or ``(events, prune)``."""
    try:
        events, prune = picky
    except (TypeError, ValueError):
        raise TypeError("picky must be (events, prune): the events as (left, right) and (token,) tuples") from None
    if prune is not None:
        prune = check_prune(prune)
        if prune is None:
            raise ValueError("a Picky vocabulary's prune is below 1 (prune=1 removes nothing: ordinary BPE)")
    return Picky(tuple(tuple(e) if isinstance(e, list) else e for e in events), prune)


def refuse(what: str) -> ValueError:
    """The error of an export or reshaping that a Picky vocabulary cannot take."""
    return ValueError(
        f"{what} cannot hold a Picky BPE vocabulary: it is encoded by replaying its merges and removals "
        f"in order (Tokenizer.picky.events), which a merge list or ranks do not express; save it with "
        f"Tokenizer.save (the .bpe file records the events)"
    )
