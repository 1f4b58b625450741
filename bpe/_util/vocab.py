"""The vocabulary: ids and the bytes they stand for, from merges or from ranks.

Ids 0..255 are the 256 single bytes; each merge ``(left, right)`` makes the
token ``vocab[left] + vocab[right]``, with the next free id (or the id that
already has those bytes). A rank vocabulary (tiktoken's) gives each token's
bytes and id directly, and may have holes.
"""

from __future__ import annotations

from bpe._core import MAX_ID

#: The largest token id, from the core (``MAX_ID`` in ``rust/vocab.rs``): the
#: decoder is a table indexed by id, so a file claiming id 4,000,000,000 is
#: refused, not allocated. 2**24 - 1 is 80 times the largest vocabulary in use.
MAX_VOCAB_SIZE = MAX_ID + 1

__all__ = ["MAX_ID", "MAX_VOCAB_SIZE", "replay", "vocab_from_ranks", "check_id_range"]


def replay(merges) -> tuple[dict[int, bytes], dict[tuple[int, int], int]]:
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


def vocab_from_ranks(ranks: dict[bytes, int]) -> dict[int, bytes]:
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


def check_id_range(vocab: dict[int, bytes], special_tokens: dict[str, int]) -> None:
    """Every id must be at most MAX_ID (the Rust core checks it too; here the
    message names the token)."""
    if max(vocab, default=0) <= MAX_ID and max(special_tokens.values(), default=0) <= MAX_ID:
        return
    for token, i in [*((t, i) for i, t in vocab.items()), *special_tokens.items()]:
        if i > MAX_ID:
            raise ValueError(f"token {token!r} has id {i}, out of range: ids must be at most {MAX_ID}")
