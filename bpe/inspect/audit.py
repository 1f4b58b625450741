"""`bpe audit`: tokens of a vocabulary that will behave badly in a model.

Categories (docs/inspect.md#bpe-audit gives the same):

- **unreachable by merging** (no corpus needed): a token of two or more
  bytes that merging its own bytes, lowest rank first from single bytes
  (tiktoken's loop, without its shortcut for a chunk that is a whole token),
  does not end with. Such a token is produced only where a pre-tokenized
  chunk is exactly its bytes, never inside a longer chunk: if it were
  produced inside one, no merge would have crossed its edges, so the merges
  inside its span would be those of merging its bytes alone (the same pairs,
  ranks and left-to-right tie-break), which do not end with it.
- **rare** ("glitch token" candidates, like GPT-2's " SolidGoldMagikarp";
  with ``--corpus``): produced at most ``min_count`` times when encoding the
  corpus. Ranked by count, then longest first: a long token the model never
  sees in training keeps an untrained embedding.
- **consumed** (intermediate residue; with ``--corpus``): a token that is
  nearly always absorbed into longer tokens. ``inside(t)`` counts t's
  occurrences in the merge trees of all tokens produced (a token built from
  t twice counts twice): ``inside(t) = count(t) + sum over merges (l, r) -> n
  of ([l == t] + [r == t]) * inside(n)``. Listed when ``inside(t) >=
  min_inside`` and ``count(t) <= max_share * inside(t)``; ranked by inside.
  (The same idea as "intersection over self" in Chizhov et al., "BPE Gets
  Picky", 2024.)
- **not UTF-8**: tokens whose bytes are not valid UTF-8 on their own
  (pieces of a character; the byte tokens 0x80..0xFF among them).
- **near duplicates**: groups of tokens equal after dropping leading spaces
  and case-folding (``"the"``, ``" the"``, ``" The"``, ``"THE"``).
"""

from __future__ import annotations

import os
from typing import Sequence

from bpe.inspect import metrics as metrics
from bpe.inspect.show import is_partial, piece
from bpe.tokenizer import Tokenizer


def merge_result(raw: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """``raw`` merged from single bytes, lowest-ranked adjacent pair first
    (leftmost on ties), with no whole-chunk shortcut."""
    parts = [raw[i : i + 1] for i in range(len(raw))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if best is None:
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return parts


def unreachable(tok: Tokenizer) -> list[int]:
    """Ids of the tokens that merging their own bytes does not produce."""
    ranks = {b: i for i, b in tok.vocab.items()}
    return sorted(i for i, b in tok.vocab.items() if len(b) > 1 and merge_result(b, ranks) != [b])


def corpus_counts(tok: Tokenizer, paths: Sequence[str | os.PathLike], *, threads: int | None = None):
    """How often each id is produced when encoding the files (in Rust, on
    all cores; special-token text counts as text): a numpy array of n_vocab."""
    np = metrics.numpy()
    ids, _ = tok.encode_files(list(paths), disallowed_special=(), num_threads=threads)
    return np.bincount(ids, minlength=tok.n_vocab), len(ids)


def inside_counts(tok: Tokenizer, counts) -> dict[int, int]:
    """``inside(t)`` of the module docstring, for every ordinary token."""
    inside = {i: int(counts[i]) for i in tok.vocab}
    # A merge's result has a higher id than its parts: from the top down, each
    # result's total is final before it is handed to its parts.
    for (left, right), new in sorted(tok.merges.items(), key=lambda m: -m[1]):
        inside[left] += inside[new]
        inside[right] += inside[new]
    return inside


def _item(tok: Tokenizer, i: int, counts=None, **extra) -> dict:
    raw = tok.vocab[i]
    out = {"id": i, "token": piece(raw), "bytes": raw.hex(), "length": len(raw)}
    if counts is not None:
        out["count"] = int(counts[i])
    out.update(extra)
    return out


def audit(
    tok: Tokenizer,
    corpus: Sequence[str | os.PathLike] = (),
    *,
    min_count: int = 0,
    min_inside: int = 100,
    max_share: float = 0.01,
    threads: int | None = None,
) -> dict:
    """The report: ``{"vocab_size", "corpus_tokens", "categories": {name:
    {"definition", "total", "items"}}}``, items ranked (most suspicious first)."""
    counts, n_tokens = corpus_counts(tok, corpus, threads=threads) if corpus else (None, None)
    cats: dict[str, dict] = {}

    def add(name, definition, items):
        cats[name] = {"definition": definition, "total": len(items), "items": items}

    if tok.picky is not None:
        # A Picky BPE vocabulary is encoded by replaying its events, not by
        # ranks: "unreachable" and "consumed" (which read the merge list) do
        # not apply; its removed tokens are listed instead.
        add("removed", f"removed during Picky BPE training (prune={tok.picky.prune}) and not made again: "
            f"they have no id and are never produced",
            [{"id": "-", "token": piece(b), "bytes": b.hex(), "length": len(b)} for b in tok.removed_tokens])
    else:
        add("unreachable", "merging the token's own bytes (lowest rank first, no shortcut) does not produce it: "
            "it appears only where a whole pre-tokenized chunk is exactly its bytes",
            [_item(tok, i, counts) for i in unreachable(tok)])
    if counts is not None:
        rare = [i for i in tok.vocab if counts[i] <= min_count]
        rare.sort(key=lambda i: (int(counts[i]), -len(tok.vocab[i]), i))
        add("rare", f"produced at most {min_count} times on the corpus (glitch-token candidates)",
            [_item(tok, i, counts) for i in rare])
    if counts is not None and tok.picky is None:
        inside = inside_counts(tok, counts)
        consumed = [i for i in tok.vocab
                    if inside[i] >= min_inside and counts[i] <= max_share * inside[i] and len(tok.vocab[i]) > 1]
        consumed.sort(key=lambda i: (-inside[i], i))
        add("consumed", f"inside longer tokens at least {min_inside} times, alone at most {max_share:.0%} of those "
            f"(intermediate residue)",
            [_item(tok, i, counts, inside=inside[i]) for i in consumed])
    add("not_utf8", "the token's bytes are not valid UTF-8 on their own",
        [_item(tok, i, counts) for i in sorted(tok.vocab) if is_partial(tok.vocab[i])])
    groups: dict[str, list[int]] = {}
    for i, raw in tok.vocab.items():
        if not is_partial(raw):
            key = raw.decode("utf-8").lstrip(" ").casefold()
            if key:
                groups.setdefault(key, []).append(i)
    dup = sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), g[0]))
    add("near_duplicates", "tokens equal after dropping leading spaces and case-folding",
        [{"key": piece(tok.vocab[g[0]].decode("utf-8").lstrip(" ").casefold().encode("utf-8")),
          "tokens": [_item(tok, i, counts) for i in g]} for g in dup])
    return {"vocab_size": len(tok.vocab), "corpus_tokens": n_tokens, "categories": cats}


def format_report(report: dict, *, top: int = 20) -> str:
    """The report as text: each category's total and its first ``top`` items."""
    out = [f"vocabulary: {report['vocab_size']:,} ordinary tokens"
           + (f"; corpus: {report['corpus_tokens']:,} tokens" if report["corpus_tokens"] is not None
              else "; no --corpus: rare and consumed tokens need one")]
    for name, cat in report["categories"].items():
        out.append("")
        out.append(f"{name}: {cat['total']:,} ({cat['definition']})")
        for item in cat["items"][: top or None]:
            if "tokens" in item:
                out.append("  " + "  ".join(f"{t['token']!r}[{t['id']}]" for t in item["tokens"]))
                continue
            extra = "".join(f"  {k} {item[k]:,}" for k in ("count", "inside") if k in item)
            out.append(f"  {item['id']:>7}  {item['token']!r}{extra}")
        if top and cat["total"] > top:
            out.append(f"  ... {cat['total'] - top:,} more (--top 0 for all)")
    return "\n".join(out)
