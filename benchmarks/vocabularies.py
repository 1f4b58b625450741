"""Ordinary BPE, SuperBPE and Picky BPE side by side (docs/superbpe.md,
docs/pruning.md): each trained in a fresh process on the same text at each
size, then measured on held-out text never trained on.

Columns: training time (the median of `--train-rounds` trainings, each in a
fresh process, the methods alternated round by round; with more than one, the
range too; and its ratio to BPE's of the same size) and peak RSS (the largest
of the training processes'), bytes per token on each held-out file and the change against BPE of the same size, and
encoding speed (`encode_to_numpy` of the first held-out file: one call in a
fresh process pinned to one CPU, warmed on another text (`--warm`), the best of
`--rounds` such processes, the methods alternated round by round; MB/s of UTF-8).

    python benchmarks/vocabularies.py --train a.txt b.txt --held c.txt d.txt \\
        --sizes 50000,200000 [--superbpe 0.8,0.9] [--prune 0.9,0.95] [--max-memory 1G] \\
        [--warm w.txt] [--train-rounds 5] [--out benchmarks/results/vocabularies.md]

The methods are named as `bpe train` spells them: "bpe", "superbpe 0.8"
(transition at 80% of the size), "prune 0.9".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TRAIN = r"""
import json, resource, sys, time
from pathlib import Path
import bpe
args = json.loads(sys.argv[1])
t = time.perf_counter()
tok = bpe.Tokenizer.train([Path(p) for p in args["train"]], args["size"], superbpe=args["superbpe"],
                          prune=args["prune"], max_memory=args["max_memory"], progress=False)
seconds = time.perf_counter() - t
tok.save(args["out"])
print(json.dumps({"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "removed": len(tok.removed_tokens)}))
"""

COUNT = r"""
import json, sys
import bpe
args = json.loads(sys.argv[1])
tok = bpe.Tokenizer.load(args["tok"])
print(json.dumps({"tokens": [len(tok.encode_to_numpy(open(p, encoding="utf-8").read())) for p in args["held"]]}))
"""

# One timed call on text this process has not encoded: warmed on another text
# first. (Not on the timed text itself: a second call on the same text finds
# every word in the chunk cache, which rewards ordinary BPE, whose chunks are
# words, far more than SuperBPE, whose chunks are sentences.)
TIME = r"""
import json, sys, time
import bpe
args = json.loads(sys.argv[1])
tok = bpe.Tokenizer.load(args["tok"])
tok.encode_to_numpy(open(args["warm"], encoding="utf-8").read())
text = open(args["held"], encoding="utf-8").read()
t = time.perf_counter(); tok.encode_to_numpy(text); seconds = time.perf_counter() - t
print(json.dumps({"mb_s": len(text.encode("utf-8")) / seconds / 1e6}))
"""


def run_json(code: str, args: dict, pin: str | None = None) -> dict:
    cmd = [sys.executable, "-c", code, json.dumps(args)]
    if pin is not None:
        cmd = ["taskset", "-c", pin] + cmd
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd[:3])} ...\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", nargs="+", required=True)
    ap.add_argument("--held", nargs="+", required=True)
    ap.add_argument("--sizes", default="50000")
    ap.add_argument("--superbpe", default="0.8,0.9", help="transitions, as fractions of the size ('' for none)")
    ap.add_argument("--prune", default="0.9,0.95", help="Picky thresholds ('' for none)")
    ap.add_argument("--max-memory", default=None)
    ap.add_argument("--warm", help="a text to warm the encoder on before the timed encodings (else no speed column)")
    ap.add_argument("--pin", default="1", help="the CPU the encoding speed is measured on")
    ap.add_argument("--rounds", type=int, default=3, help="timed processes per vocabulary (the best counts)")
    ap.add_argument("--train-rounds", type=int, default=1,
                    help="trainings per method, alternated round by round (the median time counts)")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = [("bpe", None, None)]
    methods += [(f"superbpe {f}", float(f), None) for f in args.superbpe.split(",") if f]
    methods += [(f"prune {p}", None, float(p)) for p in args.prune.split(",") if p]
    held_bytes = [os.path.getsize(p) for p in args.held]
    lines = [
        f"train: {', '.join(args.train)} ({sum(os.path.getsize(p) for p in args.train) / 1e6:.0f} MB); "
        f"held out: {', '.join(args.held)}; max_memory {args.max_memory}; "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs",
        "",
        "| size | method | train s (vs BPE) | peak RSS MB | removed | "
        + " | ".join(f"bytes/token {os.path.basename(p)} (vs BPE)" for p in args.held)
        + (" | encode MB/s (vs BPE)" if args.warm else "") + " |",
        "|---" * (5 + len(args.held) + bool(args.warm)) + "|",
    ]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            # The methods' trainings alternate, round by round, as the timed
            # encodings below do; each method's median time counts, and its
            # largest peak.
            runs = {name: [] for name, *_ in methods}
            for _ in range(max(1, args.train_rounds)):
                for name, fraction, prune in methods:
                    out = os.path.join(tmp, f"{size}-{name.replace(' ', '-')}.bpe")
                    runs[name].append(run_json(TRAIN, {"train": args.train, "size": size, "out": out, "prune": prune,
                                                       "superbpe": None if fraction is None else int(size * fraction),
                                                       "max_memory": args.max_memory}))
            rows = []
            for name, *_ in methods:
                out = os.path.join(tmp, f"{size}-{name.replace(' ', '-')}.bpe")
                times = sorted(r["seconds"] for r in runs[name])
                trained = {"seconds": statistics.median(times), "range": (times[0], times[-1]),
                           "rss_mb": max(r["rss_mb"] for r in runs[name]), "removed": runs[name][0]["removed"]}
                tokens = run_json(COUNT, {"tok": out, "held": args.held})["tokens"]
                rows.append((name, out, trained, [b / n for b, n in zip(held_bytes, tokens)]))
            # The methods' timed calls alternate, round by round, so that the
            # machine's drift falls on all of them alike.
            speeds = {name: 0.0 for name, *_ in rows}
            for _ in range(args.rounds if args.warm else 0):
                for name, out, *_ in rows:
                    timed = run_json(TIME, {"tok": out, "held": args.held[0], "warm": args.warm}, pin=args.pin)
                    speeds[name] = max(speeds[name], timed["mb_s"])
            base_ratios, base_speed = rows[0][3], speeds[rows[0][0]]
            base_seconds = rows[0][2]["seconds"]
            for name, out, trained, ratios in rows:
                cells = [f"{r:.3f} ({100 * (r / b - 1):+.1f}%)" for r, b in zip(ratios, base_ratios)]
                if args.warm:
                    cells.append(f"{speeds[name]:.1f} ({speeds[name] / base_speed:.2f}x)")
                low, high = trained["range"]
                spread = f" ({low:.1f}-{high:.1f})" if args.train_rounds > 1 else ""
                line = (f"| {size:,} | {name} | {trained['seconds']:.1f}{spread} "
                        f"({trained['seconds'] / base_seconds:.2f}x) | {trained['rss_mb']:.0f} | "
                        f"{trained['removed']:,} | " + " | ".join(cells) + " |")
                lines.append(line)
                print(line, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
