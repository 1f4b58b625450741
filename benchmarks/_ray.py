"""The ray section (``--only ray``): counting throughput on a local Ray with
1, 2, 4, ... workers (``--ray-workers``; those past this machine's cores are
left out and said so) against the multithreaded ``bpe.count`` on the same
file, and a check that every run's count table is byte-identical to it.

The curve the feature is for (1 to 16 workers) needs a 16-core machine:
on fewer cores the larger counts are not measured, never extrapolated.
Writes ``results/ray.md`` and ``ray.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def _best(fn, repeats: int) -> tuple[float, object]:
    best, out = None, None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, out


def ray_section(args, corp: dict, info: dict) -> None:
    import bpe
    from bpe import distributed
    from bpe.distributed.work import table_bytes

    try:
        import ray
    except ImportError:
        print("ray section: ray is not installed (pip install 'bpe[ray]'); skipped")
        return
    path = Path(corp["main"])
    size = path.stat().st_size
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = [int(w) for w in args.ray_workers.split(",")]
    workers = [w for w in wanted if w <= cores]
    left_out = [w for w in wanted if w > cores]
    # Enough shards that every worker count has several each to balance.
    shard = max(1 << 20, size // (4 * max(workers)))
    print(f"\n## Ray: counting {path.name} ({size / 1e6:.0f} MB) in {-(-size // shard)} shards; {cores} cores")
    t_local, whole = _best(lambda: bpe.count([path], progress=False), args.repeats)
    reference = table_bytes(whole)
    rows = [{"engine": "bpe.count (all cores)", "workers": None, "seconds": t_local, "mb_s": size / 1e6 / t_local,
             "identical": True}]
    ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False)
    try:
        for w in workers:
            t, counts = _best(lambda: distributed.count([path], num_workers=w, shard_size=shard, progress=False),
                              args.repeats)
            rows.append({"engine": "ray", "workers": w, "seconds": t, "mb_s": size / 1e6 / t,
                         "identical": table_bytes(counts) == reference})
    finally:
        ray.shutdown()
    lines = ["| engine | workers | seconds | MB/s | vs bpe.count | table identical |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['engine']} | {r['workers'] or '-'} | {r['seconds']:.2f} | {r['mb_s']:.1f} | "
                     f"{t_local / r['seconds']:.2f}x | {'yes' if r['identical'] else 'NO'} |")
    if left_out:
        lines.append(f"\nNot measured: {', '.join(map(str, left_out))} workers (this machine has {cores} cores).")
    text = "\n".join(lines)
    print(text)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ray.json").write_text(json.dumps({"machine": info, "file": str(path), "bytes": size, "shard_bytes": shard,
                                              "rows": rows, "not_measured": left_out}, indent=1, default=str))
    (out / "ray.md").write_text(f"# Ray: counting throughput vs workers\n\n{path.name}, {size:,} bytes, "
                                f"{cores} cores.\n\n{text}\n")
    print(f"wrote {out / 'ray.md'} and {out / 'ray.json'}")
