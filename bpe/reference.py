"""Pure-Python reference implementation of byte-level BPE.

This module is the *executable specification* of the tokenizer. It is slow on
purpose: every training step recounts every pair from scratch so that the code
is short enough to be checked by eye. The Rust core must produce exactly the
same merges and the same token ids as the functions below; the test-suite
compares the two.

It depends only on the standard library and the third-party ``regex`` module
(needed for ``\\p{L}``-style classes and possessive quantifiers in the split
patterns), so it can be imported even when the compiled extension is missing.

Vocabulary model
----------------
* Ids ``0..255`` are the 256 single bytes, ``vocab[i] == bytes([i])``.
* Every merge ``(left, right, new_id)`` defines
  ``vocab[new_id] == vocab[left] + vocab[right]``.
* Special tokens are not handled here. They occupy the *last* ids of the
  vocabulary and count towards ``vocab_size``; the caller appends them.

Training rules (these are the details that make BPE implementations disagree,
so they are pinned down here)
-------------------------------------------------------------------------------
1. Text is pre-tokenized with ``regex.findall(pattern, doc)`` separately for
   each document, so merges never cross a chunk or document boundary. Identical
   chunks are counted once and weighted by their frequency.
2. At every step the pair with the highest (frequency-weighted) count wins.
3. TIE-BREAK: among pairs with equal counts, the pair whose byte strings
   ``(vocab[left], vocab[right])`` compare lexicographically smallest wins
   (left bytes first, then right bytes). Ties are therefore resolved by
   content, not by id or by the order pairs were first seen, which makes the
   result independent of hash-map iteration order.
4. DUPLICATE RULE: two different merge paths can spell the same bytes
   (e.g. ``"ab" + "c"`` and ``"a" + "bc"``). If ``vocab[left] + vocab[right]``
   already exists, the merge is still recorded and applied, but it reuses the
   existing id instead of creating a second token with identical bytes. The
   vocabulary does not grow on such a step. This keeps token bytes unique,
   which ``encode`` (which looks tokens up by bytes) relies on.
   Note: with *this* training loop the rule can never fire. A run of tokens
   that starts and ends on token boundaries is always split exactly as the
   same bytes would be on their own (the left-to-right merge scan cannot see
   across a boundary it did not cross), and on its own a token's bytes are
   already one token. The rule is kept as a cheap safety net for
   implementations (such as an incremental one) and merge lists from outside.
5. Training stops when the vocabulary holds ``vocab_size - n_special`` tokens,
   or earlier when no adjacent pair is left (every chunk is a single token).

Encoding rules
--------------
Encoding uses "rank" semantics: within a chunk, repeatedly merge the adjacent
pair whose concatenation has the lowest id in ``ranks``. For a vocabulary
produced by ``train`` the id order is the merge order, so this reproduces the
training merges; it also works for vocabularies given only as bytes -> id.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

import regex

__all__ = ["pretokenize", "train", "encode", "decode", "vocab_from_merges", "train_superbpe", "encode_merges",
           "train_picky", "encode_picky"]

#: Split pattern used by GPT-4's cl100k tokenizer (possessive form).
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

Merge = tuple[int, int, int]


def pretokenize(text: str, pattern: str) -> list[str]:
    """Split ``text`` into chunks with ``regex.findall``.

    Empty matches are kept here (so the result is exactly what ``findall``
    returns); ``train`` and ``encode`` ignore them because an empty chunk has
    no bytes to tokenize.
    """
    return regex.findall(pattern, text)


def _chunk_counts(texts: Iterable[str], pattern: str) -> Counter[bytes]:
    """The distinct non-empty chunks of ``texts`` (each one document), as
    UTF-8, with the number of times each occurs."""
    counts: Counter[bytes] = Counter()
    for doc in texts:
        for chunk in pretokenize(doc, pattern):
            if chunk:
                counts[chunk.encode("utf-8")] += 1
    return counts


def _merge_word(word: tuple[int, ...], left: int, right: int, new_id: int) -> tuple[int, ...]:
    """Replace each non-overlapping ``(left, right)`` in ``word``, scanning left to right.

    Left-to-right scanning decides overlaps such as ``a a a`` -> ``aa a``.
    """
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train(
    texts: Iterable[str], vocab_size: int, pattern: str, n_special: int = 0
) -> list[Merge]:
    """Learn merges from ``texts`` (each element is one document).

    Returns the merges ``[(left_id, right_id, new_id), ...]`` in the order they
    were learned. See the module docstring for the tie-break and duplicate
    rules. Raises ``ValueError`` if fewer than 256 ordinary tokens would fit.
    """
    target = vocab_size - n_special
    if target < 256:
        raise ValueError(
            f"vocab_size - n_special must be >= 256 (got {vocab_size} - {n_special})"
        )

    # Distinct chunks with their frequencies; each chunk is a tuple of ids.
    words: dict[tuple[int, ...], int] = {tuple(b): n for b, n in _chunk_counts(texts, pattern).items()}

    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    return _learn(words, vocab, target)


def _learn(
    words: dict[tuple[int, ...], int],
    vocab: dict[int, bytes],
    target: int,
    allowed: Callable[[bytes], bool] | None = None,
) -> list[Merge]:
    """The merge loop: merge the best pair of ``words`` (chunks as ids, with
    their counts) until ``vocab`` (grown in place) holds ``target`` tokens.
    ``allowed``, if given, refuses the pairs whose token it rejects (the next
    best pair is merged instead)."""
    id_of: dict[bytes, int] = {b: i for i, b in vocab.items()}
    merges: list[Merge] = []

    while len(vocab) < target:
        pair_counts: Counter[tuple[int, int]] = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += n
        if allowed is not None:
            pair_counts = Counter({p: n for p, n in pair_counts.items() if allowed(vocab[p[0]] + vocab[p[1]])})
        if not pair_counts:
            break  # every chunk is a single token: nothing left to merge

        # Highest count first; on ties the smallest (left bytes, right bytes).
        left, right = min(
            pair_counts,
            key=lambda p: (-pair_counts[p], vocab[p[0]], vocab[p[1]]),
        )
        new_bytes = vocab[left] + vocab[right]
        new_id = id_of.get(new_bytes)
        if new_id is None:  # genuinely new token
            new_id = len(vocab)
            vocab[new_id] = new_bytes
            id_of[new_bytes] = new_id
        merges.append((left, right, new_id))

        # Applying a merge can make two distinct words identical, so re-sum.
        merged: dict[tuple[int, ...], int] = {}
        for word, n in words.items():
            w = _merge_word(word, left, right, new_id)
            merged[w] = merged.get(w, 0) + n
        words = merged

    return merges


def vocab_from_merges(merges: Iterable[Merge]) -> dict[int, bytes]:
    """Rebuild ``id -> bytes`` by replaying ``merges`` on top of the 256 bytes.

    A merge whose ``new_id`` is already present (duplicate rule) must spell the
    same bytes; anything else means the merge list is corrupt.
    """
    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    for left, right, new_id in merges:
        new_bytes = vocab[left] + vocab[right]
        if new_id in vocab and vocab[new_id] != new_bytes:
            raise ValueError(f"merge {(left, right, new_id)} contradicts existing token")
        vocab[new_id] = new_bytes
    return vocab


def _encode_chunk(chunk: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Tokenize one chunk by repeatedly merging the lowest-ranked adjacent pair."""
    if chunk in ranks:  # fast path, and the answer for any chunk that is a token
        return [ranks[chunk]]
    parts = [chunk[i : i + 1] for i in range(len(chunk))]
    while len(parts) > 1:
        best_rank, best_i = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            # Strict "<" keeps the leftmost pair when ranks tie.
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best_i = rank, i
        if best_rank is None:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return [ranks[p] for p in parts]


def encode(text: str, ranks: dict[bytes, int], pattern: str) -> list[int]:
    """Encode ordinary ``text`` (no special tokens) to ids.

    ``ranks`` maps token bytes to id and must contain all 256 single bytes;
    for a trained tokenizer it is ``{vocab[i]: i for i in vocab}``.
    """
    ids: list[int] = []
    for chunk in pretokenize(text, pattern):
        if chunk:
            ids.extend(_encode_chunk(chunk.encode("utf-8"), ranks))
    return ids


def decode(ids: Iterable[int], vocab: dict[int, bytes]) -> bytes:
    """Concatenate the bytes of ``ids``. Returns bytes, since a slice of ids
    may end in the middle of a multi-byte UTF-8 character."""
    return b"".join(vocab[i] for i in ids)


# -- SuperBPE (Liu et al., 2025; bpe/_tokenizer/superbpe.py) ----------------


def superword_allowed(token: bytes, max_words: int) -> bool:
    """Stage 2's rule on a token: at most ``max_words`` words (runs of bytes
    between spaces) and no ``": "``."""
    return b": " not in token and len([w for w in token.split(b" ") if w]) <= max_words


def train_superbpe(
    texts: Iterable[str],
    vocab_size: int,
    transition: int,
    pattern: str,
    stage2_pattern: str,
    n_special: int = 0,
    max_words: int = 4,
) -> list[Merge]:
    """SuperBPE's merges: :func:`train` to ``transition`` tokens (counted as
    ``vocab_size`` is), then the merge loop again on the chunks of
    ``stage2_pattern``, each starting as the first stage encodes it whole,
    with :func:`superword_allowed`'s rule, to ``vocab_size``."""
    texts = list(texts)
    merges = train(texts, transition, pattern, n_special)
    vocab = vocab_from_merges(merges)
    ranks = {b: i for i, b in vocab.items()}
    words: dict[tuple[int, ...], int] = {}
    for chunk, n in _chunk_counts(texts, stage2_pattern).items():
        word = tuple(_encode_chunk(chunk, ranks))
        words[word] = words.get(word, 0) + n
    return merges + _learn(words, vocab, vocab_size - n_special, lambda t: superword_allowed(t, max_words))


def _encode_with_merges(chunk: bytes, places: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """BPE with a merge list over one chunk: from its single bytes, merge the
    adjacent pair that comes first in the list (the leftmost such pair on a
    tie), until no adjacent pair is a merge."""
    ids = list(chunk)
    while True:
        best = None
        for i in range(len(ids) - 1):
            m = places.get((ids[i], ids[i + 1]))
            if m is not None and (best is None or m[0] < best[0]):
                best = (m[0], i, m[1])
        if best is None:
            return ids
        _, i, new = best
        ids[i : i + 2] = [new]


def encode_merges(text: str, merges: Iterable[Merge], pattern: str) -> list[int]:
    """Encode ordinary ``text`` as a SuperBPE vocabulary is encoded: its
    chunks are ``pattern``'s (the second stage's), each encoded by BPE with
    the merge list (:func:`_encode_with_merges`), as the paper's tokenizer
    files encode."""
    places: dict[tuple[int, int], tuple[int, int]] = {}
    for k, (left, right, new) in enumerate(merges):
        places.setdefault((left, right), (k, new))
    ids: list[int] = []
    for chunk in pretokenize(text, pattern):
        if chunk:
            ids.extend(_encode_with_merges(chunk.encode("utf-8"), places))
    return ids


# -- Picky BPE ----------------------------------------------------------------
#
# Picky BPE (Chizhov et al., 2024, arXiv 2409.04599; bpe/_tokenizer/picky.py):
# events in training ids, ``(left, right)`` for a merge (the token of those
# bytes keeps its id if it exists, present or removed, else takes the next)
# and ``(token,)`` for a removal.


def _split_parts(x: int, made_of: dict[int, tuple[int, int]], present: set[int]) -> list[int]:
    """``x``'s parts: the pair it was first made of, each part split further
    while it is not present (bytes always are)."""
    if x < 256 or x in present:
        return [x]
    left, right = made_of[x]
    return _split_parts(left, made_of, present) + _split_parts(right, made_of, present)


def train_picky(
    texts: Iterable[str], vocab_size: int, pattern: str, prune: float, n_special: int = 0
) -> list[tuple[int, ...]]:
    """Learn a Picky BPE vocabulary of ``vocab_size - n_special`` present
    tokens: :func:`train`'s loop (same counts, tie-break and duplicate rule),
    and after each merge of ``(a, b)`` that merged ``f`` occurrences, ``a``
    then ``b`` (once if equal) loses ``f`` occurrences (``2f`` if equal) and
    is removed if ``f / (left + f) > prune`` (``left``: its occurrences
    left) and it is not a byte: every occurrence is split into its parts,
    which gain its occurrences. Stops also when no pair is left, or after
    ``8 * max(target, 256)`` events (a guard the Rust loop shares)."""
    target = vocab_size - n_special
    words: dict[tuple[int, ...], int] = {tuple(b): n for b, n in _chunk_counts(texts, pattern).items()}
    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    id_of = {b: i for i, b in vocab.items()}
    made_of: dict[int, tuple[int, int]] = {}
    present = set(range(256))
    freq: Counter[int] = Counter()
    for word, n in words.items():
        for t in word:
            freq[t] += n
    events: list[tuple[int, ...]] = []
    while len(present) < target and len(events) < 8 * max(target, 256):
        pair_counts: Counter[tuple[int, int]] = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += n
        if not pair_counts:
            break
        left, right = min(pair_counts, key=lambda p: (-pair_counts[p], vocab[p[0]], vocab[p[1]]))
        made = vocab[left] + vocab[right]
        new = id_of.get(made)
        if new is None:
            new = len(vocab)
            vocab[new], id_of[made], made_of[new] = made, new, (left, right)
        present.add(new)
        events.append((left, right))
        merged: dict[tuple[int, ...], int] = {}
        f = 0
        for word, n in words.items():
            w = _merge_word(word, left, right, new)
            f += (len(word) - len(w)) * n
            merged[w] = merged.get(w, 0) + n
        words = merged
        freq[new] += f
        for x in (left,) if left == right else (left, right):
            freq[x] -= 2 * f if left == right else f
            if x >= 256 and x in present and f / (freq[x] + f) > prune:
                present.discard(x)
                parts = _split_parts(x, made_of, present)
                for p in parts:
                    freq[p] += freq[x]
                freq[x] = 0
                split: dict[tuple[int, ...], int] = {}
                for word, n in words.items():
                    w = tuple(t for u in word for t in (parts if u == x else (u,)))
                    split[w] = split.get(w, 0) + n
                words = split
                events.append((x,))
    return events


def encode_picky(text: str, events: Iterable[tuple[int, ...]], pattern: str) -> list[int]:
    """Encode ordinary ``text`` with a Picky BPE vocabulary, literally: a
    chunk that is a present token whole is that token (as the paper's
    encoder has it); any other chunk starts as its bytes and every event is
    applied in order (a merge to every adjacent pair, left to right; a
    removal to every occurrence, split into the parts it had when removed).
    Ids: the present tokens in training-id order, from 0."""
    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    id_of = {b: i for i, b in vocab.items()}
    made_of: dict[int, tuple[int, int]] = {}
    present = set(range(256))
    steps: list[tuple[int, ...]] = []  # (left, right, new) and (token, parts)
    for event in events:
        if len(event) == 2:
            left, right = event
            made = vocab[left] + vocab[right]
            new = id_of.get(made)
            if new is None:
                new = len(vocab)
                vocab[new], id_of[made], made_of[new] = made, new, (left, right)
            present.add(new)
            steps.append((left, right, new))
        else:
            (x,) = event
            present.discard(x)
            steps.append((x, tuple(_split_parts(x, made_of, present))))
    final = {t: i for i, t in enumerate(sorted(present))}
    ids: list[int] = []
    for chunk in pretokenize(text, pattern):
        b = chunk.encode("utf-8")
        if not b:
            continue
        if b in id_of and id_of[b] in present:
            ids.append(final[id_of[b]])
            continue
        word: tuple[int, ...] = tuple(b)
        for step in steps:
            if len(step) == 3:
                word = _merge_word(word, *step)
            else:
                x, parts = step
                word = tuple(t for u in word for t in (parts if u == x else (u,)))
        ids.extend(final[t] for t in word)
    return ids
