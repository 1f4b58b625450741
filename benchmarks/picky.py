"""Picky BPE against ordinary BPE (docs/pruning.md): trains on the first
TRAIN bytes of a corpus, at one size, without pruning and with each
threshold, and measures bytes per token on the next HELD bytes (held out)
and the training time. Usage:

    python benchmarks/picky.py CORPUS.txt[.xz] [--size 50000] [--train 30M] [--held 3M] [--prune 0.9 0.95]
"""

from __future__ import annotations

import argparse
import lzma
import time

import bpe
from bpe._util.sizes import parse_bytes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--size", type=int, default=50000)
    ap.add_argument("--train", default="30M")
    ap.add_argument("--held", default="3M")
    ap.add_argument("--prune", type=float, nargs="*", default=[0.9, 0.95])
    args = ap.parse_args()
    n_train, n_held = parse_bytes(args.train), parse_bytes(args.held)
    opener = lzma.open if args.corpus.endswith(".xz") else open
    with opener(args.corpus, "rb") as f:
        raw = f.read(n_train + n_held)
    train = raw[:n_train].decode("utf-8", "ignore")
    held = raw[n_train:].decode("utf-8", "ignore")
    held_bytes = len(held.encode("utf-8"))
    print(f"corpus {args.corpus}: train {len(train.encode()):,} bytes, held out {held_bytes:,} bytes, "
          f"vocab_size {args.size}")
    print("| prune | train s | tokens removed | held-out tokens | bytes/token | vs BPE |")
    print("|---|---|---|---|---|---|")
    base = None
    for prune in [None, *args.prune]:
        t = time.perf_counter()
        tok = bpe.Tokenizer.train(train, args.size, prune=prune, progress=False)
        seconds = time.perf_counter() - t
        n = len(tok.encode_ordinary(held))
        ratio = held_bytes / n
        base = base or ratio
        print(f"| {prune or 'none (BPE)'} | {seconds:.1f} | {len(tok.removed_tokens):,} | {n:,} | {ratio:.4f} | "
              f"{100 * (ratio / base - 1):+.2f}% |", flush=True)


if __name__ == "__main__":
    main()
