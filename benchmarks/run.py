#!/usr/bin/env python
"""Side-by-side benchmark: bpe against other tokenizers, same files, same settings.

    python benchmarks/run.py                 # training + encoding, all anchors (about an hour on 2 cores)
    python benchmarks/run.py --quick         # 10 MB slice, 1 repeat, a few anchors (a few minutes)
    python benchmarks/run.py --only scale    # training from a 1 GB file
    python benchmarks/run.py --only shards --shards-gb 1   # JSON Lines .zst shards vs plain text
    python benchmarks/run.py --only ray       # counting on a local Ray, 1..16 workers, vs bpe.count
    python benchmarks/run.py --corpus corpora/tinyshakespeare.txt --quick   # no ../shared needed

Every measurement runs in a fresh child process (benchmarks/_worker.py) that
reports wall time, CPU time, cores used (CPU / wall) and peak RSS; the encoding
section (benchmarks/_encode.py) pins its one-thread children to one CPU. Tables go to
stdout (markdown); everything measured goes to benchmarks/results/latest.json
and a chart to benchmarks/results/chart.png. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora  # noqa: E402
import _encode  # noqa: E402
import _ray  # noqa: E402
import _shards  # noqa: E402
from _common import GPT4_PATTERN  # noqa: E402
from _harness import (ALIASES, HERE, HF1_REQUIREMENT, MB, REPO, TOOLS, bars, hf1_python, dist_version, fmt, installed, label,  # noqa: E402
                      md_table, median, ratio, run_job, section, status_text)

TRAIN_ANCHORS = ["rustbpe", "bpeasy", "hf", "sentencepiece", "gigatoken"]
# --quick keeps the anchors that answer in seconds on 10 MB.
QUICK_ANCHORS = ["rustbpe", "sentencepiece", "gigatoken", "fastokens", "toktok", "tiktoken", "riptoken"]

# How rustbpe and bpeasy are fed when the probe does not run (--quick,
# --corpus): the winners of the probe of the full run on this project's
# 2-core machine (10 MB, vocab 2,000, best of 2, machine busy): rustbpe
# paragraphs 4.15 s, ~1 MB pieces 4.31 s, lines 6.66 s; bpeasy pieces 4.69 s,
# lines 8.81 s, paragraphs 8.94 s. Many small items cost both of them Python
# work per item and smaller parallel batches.
DEFAULT_FEED = {"rustbpe": "paragraphs", "bpeasy": "pieces"}


# --------------------------------------------------------------------------
# machine and build information


def machine_info() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {dist: dist_version(t) for t, (_, dist) in TOOLS.items()}  # by distribution name
    for extra in ("numpy", "matplotlib", "awkward"):  # awkward: gigatoken's encode_files result
        try:
            versions[extra] = metadata.version(extra)
        except metadata.PackageNotFoundError:
            versions[extra] = None
    return {
        "cpu": cpu,
        "cores": cores,
        "mem_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "git": git_info(),
        "bpe_build": bpe_build_check(),
    }


def git_info() -> dict:
    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [l for l in git("status", "--porcelain", "--untracked-files=no").splitlines() if l]
    return {"commit": git("rev-parse", "--short", "HEAD"), "changed_files": len(changed)}


def bpe_build_check() -> dict:
    """Where the installed bpe lives, and whether its Python files are the
    working tree's. (The compiled core cannot be compared: after changing
    rust/, reinstall.)"""
    spec = importlib.util.find_spec("bpe")
    if spec is None or not spec.origin:
        return {"installed": False}
    pkg = Path(spec.origin).parent
    differ = []
    for src in sorted((REPO / "bpe").glob("*.py")):
        inst = pkg / src.name
        if not inst.exists() or hashlib.sha1(inst.read_bytes()).digest() != hashlib.sha1(src.read_bytes()).digest():
            differ.append(src.name)
    return {"installed": True, "path": str(pkg), "py_files_differ": differ,
            "editable": pkg.resolve() == (REPO / "bpe").resolve()}


def print_machine(info: dict) -> None:
    v = info["versions"]
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['mem_gib']} GiB; "
          f"Python {info['python']} ({sys.executable}); {info['platform']}")
    print("versions: " + ", ".join(f"{k} {v[k] or '—'}" for k in v))
    g, b = info["git"], info["bpe_build"]
    print(f"repository: {g['commit']}" + (f" + {g['changed_files']} changed files" if g["changed_files"] else ""))
    if b.get("installed"):
        where = "editable (the working tree)" if b["editable"] else b["path"]
        note = ("its Python files match the working tree"
                if not b["py_files_differ"] else f"its Python files DIFFER from the working tree: {', '.join(b['py_files_differ'])} — reinstall")
        print(f"bpe under test: {where}; {note} (the Rust core is whatever was last built)")
    else:
        print("bpe under test: NOT INSTALLED — pip install . (from the repository root)")


# --------------------------------------------------------------------------
# corpora


def corpora_for(args) -> dict:
    """name -> Path of every corpus this run uses, plus notes for the output.
    ``encode``: the encoding section's texts (each a timed slice and the
    warm-up slice after it); ``files``: the encode_files row's file and its
    warm-up file."""
    if args.corpus:
        p = Path(args.corpus).resolve()
        if not p.is_file():
            sys.exit(f"--corpus {args.corpus}: no such file")
        half = _encode.halves(p)
        return {"main": p, "main10": p, "extra": {}, "scale_parts": [p], "custom": True,
                "encode": [half], "files": (half["timed"], half["warmup"])}
    shared = Path(args.shared).resolve()
    # The shards section alone needs only its own sources (and gutenberg100m).
    needed = ({"gutenberg100m", *_shards.SOURCES} if args.sections == ["shards"] else _corpora.SOURCES)
    if not all((shared / _corpora.SOURCES[n].rel).is_file() for n in needed):
        print(_corpora.shared_missing_message(shared), file=sys.stderr)
        sys.exit(2)
    print(f"corpora: {shared} -> cache {_corpora.cache_dir()}")
    g100 = _corpora.prepare("gutenberg100m", shared)
    english = _encode.timed_and_warmup(g100, "gutenberg10m")
    out = {"main": g100, "main10": english["timed"], "extra": {}, "scale_parts": None, "custom": False,
           "shared": shared, "encode": [english]}
    if not args.quick:
        out["extra"] = {n: _corpora.prepare(n, shared) for n in ("code_mix", "flores200")}
        out["encode"] += [_encode.timed_and_warmup(out["extra"]["code_mix"], "code_mix10m"),
                          _encode.timed_and_warmup(out["extra"]["flores200"], "flores200_10m"),
                          _encode.cjk_slices(out["extra"]["flores200"])]
    if "encode" in args.sections or "many" in args.sections:
        big = _corpora.head(g100, _encode.FILES_BYTES, "gutenberg50m.txt")
        # Warmed up on the next 50 MB: another file, never the timed one (which
        # would reward a cache that keeps every word it has seen).
        out["files"] = (big, _corpora.slice_after(g100, big, _encode.FILES_BYTES, "gutenberg50m.next50m.txt"))
    if "scale" in args.sections:
        out["scale_parts"] = [_corpora.prepare(n, shared) for n in ("gutenberg100m", "enwiki100m", "code_mix", "flores200")]
    return out


def corpus_label(path: Path) -> str:
    return path.stem


# --------------------------------------------------------------------------
# training


def train_section(args, corp: dict, anchors: list[str], results: dict) -> None:
    section("Training (GPT-4 split pattern)", results, "train")
    tools = ["bpe"] + [a for a in TRAIN_ANCHORS if a in anchors]
    results["train_feed"] = feeds = choose_feeds(args, corp, tools, results)

    cases = []  # (corpus path, vocab, repeats)
    vocabs = args.vocabs
    if corp["custom"]:
        cases = [(corp["main"], v, args.repeats) for v in vocabs]
    elif args.quick:
        cases = [(corp["main10"], v, 1) for v in vocabs[:1]]
    else:
        cases = [(corp["main"], v, args.repeats) for v in vocabs]
        cases += [(corp["main10"], v, args.repeats) for v in vocabs]
        # Code and multilingual text at the first vocabulary size: one run
        # each, to see how the ratios move with the kind of text.
        cases += [(p, vocabs[0], 1) for p in corp["extra"].values()]

    rows = results.setdefault("train", [])
    for path, vocab, reps in cases:
        name = corpus_label(path)
        size = path.stat().st_size
        runs = {t: [] for t in tools}
        skip = {}
        for t in tools:
            if not installed(t):
                skip[t] = {"status": "not installed"}
        # Round-robin (tool 1, tool 2, ..., then again): slow drifts in the
        # machine's load spread over every tool instead of hitting one.
        for rep in range(reps):
            for t in tools:
                if t in skip:
                    continue
                job = {"kind": "train", "tool": t, "file": str(path), "vocab": vocab, "feed": feeds.get(t)}
                if t == "sentencepiece":
                    job["max_line_bytes"] = _corpora.max_line_bytes(path)
                r = run_job(job, args.timeout)
                if r.get("status") != "ok":
                    skip[t] = r
                    print(f"  {name} {vocab} {t}: {r.get('status')}: {r.get('error', '')}", flush=True)
                    continue
                runs[t].append(r)
                print(f"  {name} vocab {vocab} {t} run {rep + 1}/{reps}: {r['wall_s']:.2f} s wall, "
                      f"{r['cores']:.2f} cores, {r['peak_rss_mb']:.0f} MB", flush=True)
        for t in tools:
            rows.append(summarize_train(name, size, vocab, t, runs[t], skip.get(t)))


def summarize_train(corpus: str, size: int, vocab: int, tool: str, runs: list, failure: dict | None) -> dict:
    row = {"corpus": corpus, "bytes": size, "vocab": vocab, "tool": tool, "n": len(runs)}
    if not runs:
        row["status"] = (failure or {}).get("status", "error")
        row["error"] = (failure or {}).get("error")
        return row
    row.update(
        status="ok",
        wall_s=median(r["wall_s"] for r in runs),
        cpu_s=median(r["cpu_s"] for r in runs),
        peak_rss_mb=max(r["peak_rss_mb"] for r in runs),  # the worst run: peaks are what break machines
        rss_before_mb=median(r.get("rss_before_mb") for r in runs),
        walls=[r["wall_s"] for r in runs],
        version=runs[0].get("version"),
        final_vocab=runs[0].get("final_vocab"),
        feed=runs[0].get("feed"),
        max_sentence_length=runs[0].get("max_sentence_length"),
    )
    row["cores"] = row["cpu_s"] / row["wall_s"]
    if failure:  # a later run failed after some succeeded
        row["note"] = f"{failure.get('status')}: {failure.get('error')}"
    return row


def choose_feeds(args, corp: dict, tools: list[str], results: dict) -> dict:
    """rustbpe and bpeasy take an iterator of strings. The probe trains each
    on the 10 MB slice cut each way (lines, paragraphs, ~1 MB pieces), best
    of two runs, and keeps the fastest, so the anchors are fed their best way."""
    feeders = [t for t in ("rustbpe", "bpeasy") if t in tools and installed(t)]
    if args.feed:
        return {t: args.feed for t in feeders}
    if args.quick or corp["custom"] or not feeders:
        return {t: DEFAULT_FEED[t] for t in feeders}
    print("feed probe: 10 MB slice, vocab 2,000 (mostly reading and counting, where feeding matters)")
    probe = {}
    chosen = {}
    for t in feeders:
        probe[t] = {}
        for feed in ("lines", "paragraphs", "pieces"):
            # Best of two: the probe only has to rank the feeds, and the
            # minimum is the least disturbed by other load on the machine.
            walls = []
            for _ in range(2):
                r = run_job({"kind": "train", "tool": t, "file": str(corp["main10"]), "vocab": 2000, "feed": feed},
                            args.timeout)
                if r.get("status") != "ok":
                    print(f"  {t} fed {feed}: {r.get('status')}: {r.get('error')}", flush=True)
                    break
                walls.append(r["wall_s"])
            probe[t][feed] = min(walls) if walls else None
            if walls:
                print(f"  {t} fed {feed}: best of {len(walls)} {min(walls):.2f} s", flush=True)
        ok = {f: w for f, w in probe[t].items() if w is not None}
        chosen[t] = min(ok, key=ok.get) if ok else DEFAULT_FEED[t]
        print(f"  -> {t} is fed {chosen[t]}", flush=True)
    results["feed_probe"] = probe
    return chosen


# --------------------------------------------------------------------------
# scale


def scale_section(args, corp: dict, results: dict) -> None:
    section("Scale: training from a ~1 GB file", results, "scale")
    parts = corp["scale_parts"]
    path, reps = _corpora.scale_file(parts)
    size = path.stat().st_size
    what = " + ".join(p.stem for p in parts)
    print(f"scale file: ({what}) repeated {reps} times = {size / MB:,.0f} MB (≥ 1 GB). Repeated text adds "
          f"no new distinct chunks, so memory here grows less than on 1 GB of fresh text.")
    vocab = args.vocabs[0]
    runs, fail = [], None
    for rep in range(args.scale_repeats):
        r = run_job({"kind": "train", "tool": "bpe", "file": str(path), "vocab": vocab}, args.timeout)
        if r.get("status") != "ok":
            fail = r
            print(f"  scale bpe: {r.get('status')}: {r.get('error')}")
            break
        runs.append(r)
        print(f"  scale bpe run {rep + 1}/{args.scale_repeats}: {r['wall_s']:.1f} s wall, "
              f"{r['cores']:.2f} cores, {r['peak_rss_mb']:.0f} MB", flush=True)
    row = summarize_train(path.stem, size, vocab, "bpe", runs, fail)
    row["what"] = f"({what}) x{reps}"
    # The reference: our 100 MB run at the same vocabulary, from the training
    # section if it ran, else measured now.
    ref = next((r for r in results.get("train", []) if r["tool"] == "bpe" and r["vocab"] == vocab
                and r["corpus"] == corpus_label(corp["main"]) and r.get("status") == "ok"), None)
    if ref is None:
        rr = run_job({"kind": "train", "tool": "bpe", "file": str(corp["main"]), "vocab": vocab}, args.timeout)
        if rr.get("status") == "ok":
            ref = summarize_train(corpus_label(corp["main"]), corp["main"].stat().st_size, vocab, "bpe", [rr], None)
    results["scale"] = {"run": row, "reference": ref}


# --------------------------------------------------------------------------
# shards


def shards_run(args, corp: dict, info: dict) -> None:
    """JSON Lines .zst shards against the same text as one .txt
    (benchmarks/_shards.py): results/shards.md and shards.json."""
    t0 = time.perf_counter()
    res = {"machine": info, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
           "command": "python benchmarks/run.py " + " ".join(sys.argv[1:])}
    section(f"Shards: training from .jsonl.zst shards vs plain text ({', '.join(f'{g:g}' for g in args.shards_gb)} GB)",
            res, "shards")
    _shards.shards_section(args, corp["shared"], res, folder=Path(args.results))
    res["seconds"] = time.perf_counter() - t0
    md = _shards.write(res, Path(args.results))
    text = md.read_text()
    print("\n" + text)
    print(f"wrote {md} and {md.with_suffix('.json')}")


# --------------------------------------------------------------------------
# tables


def train_table(results: dict) -> str:
    rows = []
    train = results.get("train", [])
    for r in train:
        ours = next((o for o in train if o["tool"] == "bpe" and o["corpus"] == r["corpus"]
                     and o["vocab"] == r["vocab"] and o.get("status") == "ok"), None)
        head = [r["corpus"], f"{r['bytes'] / MB:.0f}", f"{r['vocab']:,}", label(r["tool"])]
        if r.get("status") != "ok":
            rows.append(head + [status_text(r)] + [""] * 7)
            continue
        how = {"bpe": "file path (streamed)", "hf": "file path", "sentencepiece": "file path (lines)",
               "gigatoken": "file path (its own split pattern)"}.get(
            r["tool"], f"{r.get('feed')} (in memory)")
        q = ratio(r["wall_s"], ours["wall_s"]) if ours else None
        rows.append(head + [
            how, fmt(r["wall_s"]), fmt(r["cpu_s"]), fmt(r["cores"]), fmt(r["peak_rss_mb"], ".0f"),
            f"{r['final_vocab']:,}" if r.get("final_vocab") else "—",
            "—" if r["tool"] == "bpe" else fmt(q), str(r["n"]),
        ])
    return md_table(["corpus", "MB", "vocab", "trainer", "fed", "wall s", "CPU s", "cores", "peak RSS MB",
                     "final vocab", "ratio (their time / ours)", "runs"], rows)


def scale_table(results: dict) -> str:
    s = results.get("scale")
    if not s:
        return ""
    run, ref = s["run"], s.get("reference")
    rows = []
    names = (f"scale file: {run.get('what', '')}", f"reference: {ref['corpus']}" if ref else "reference")
    for name, r in zip(names, (run, ref)):
        if not r or r.get("status") != "ok":
            rows.append([name, "", status_text(r or {"status": "missing"}), "", "", ""])
            continue
        rows.append([name, f"{r['bytes'] / MB:,.0f}", fmt(r["wall_s"], ".1f"), fmt(r["cores"]),
                     fmt(r["peak_rss_mb"], ".0f"), f"{r['bytes'] / MB / r['wall_s']:.1f}"])
    if run.get("status") == "ok" and ref and ref.get("status") == "ok":
        rows.append(["ratio scale / reference", f"{run['bytes'] / ref['bytes']:.1f}",
                     fmt(run["wall_s"] / ref["wall_s"]), "", fmt(run["peak_rss_mb"] / ref["peak_rss_mb"]), ""])
    return f"### Scale (bpe, vocab {run['vocab']:,})\n\n" + md_table(
        ["run", "MB", "wall s", "cores", "peak RSS MB", "MB/s"], rows)


# --------------------------------------------------------------------------
# targets


def targets(results: dict) -> list[tuple[str, str, str]]:
    """(PASS/FAIL/SKIP, target, the numbers) for every target of the
    performance issue, from what this run measured."""
    out = []
    train = [r for r in results.get("train", []) if r.get("status") == "ok"]

    def tr(corpus_prefix, vocab, tool):
        return next((r for r in train if r["corpus"].startswith(corpus_prefix) and r["vocab"] == vocab
                     and r["tool"] == tool), None)

    for corpus in ("gutenberg100m", "gutenberg10m"):
        for vocab in (50000, 8000):
            ours = tr(corpus, vocab, "bpe")
            for anchor, need in (("rustbpe", 4.0), ("sentencepiece", 2.0), ("gigatoken", 4.0)):
                name = f"train {corpus} vocab {vocab // 1000}k ≥ {need:g}× {anchor}"
                a = tr(corpus, vocab, anchor)
                if not ours or not a:
                    out.append(("SKIP", name, "not measured"))
                    continue
                q = a["wall_s"] / ours["wall_s"]
                out.append(("PASS" if q >= need else "FAIL", name,
                            f"{q:.2f}× ({a['wall_s']:.2f} s vs {ours['wall_s']:.2f} s)"))
    ours_rss = [r for r in train if r["tool"] == "bpe"]
    if ours_rss:
        # The target is stated for the 100 MB training; every corpus is also
        # checked, because memory grows with distinct chunks, and the
        # multilingual corpus has far more of them per MB than English.
        for which, rows in (("100 MB corpus", [r for r in ours_rss if r["corpus"] == "gutenberg100m"]),
                            ("every corpus", ours_rss)):
            if not rows:
                continue
            over = [r for r in rows if r["peak_rss_mb"] > 150]
            out.append(("PASS" if not over else "FAIL", f"bpe peak RSS training from a file ≤ 150 MB ({which})",
                        ", ".join(f"{r['corpus']}/{r['vocab'] // 1000}k {r['peak_rss_mb']:.0f} MB" for r in rows)))
    else:
        out.append(("SKIP", "bpe peak RSS training from a file ≤ 150 MB", "not measured"))

    out += _encode.targets(results)

    s = results.get("scale")
    name = "scale: peak RSS 1 GB / 100 MB ≤ 2"
    if s and s["run"].get("status") == "ok" and s.get("reference") and s["reference"].get("status") == "ok":
        q = s["run"]["peak_rss_mb"] / s["reference"]["peak_rss_mb"]
        tq = s["run"]["wall_s"] / s["reference"]["wall_s"]
        out.append(("PASS" if q <= 2 else "FAIL", name,
                    f"{q:.2f} ({s['run']['peak_rss_mb']:.0f} vs {s['reference']['peak_rss_mb']:.0f} MB); "
                    f"time ratio {tq:.1f} for {s['run']['bytes'] / s['reference']['bytes']:.1f}× the bytes"))
    else:
        out.append(("SKIP", name, "not measured (--only scale or --scale)"))
    return out


# --------------------------------------------------------------------------
# chart


def chart(results: dict, path: Path) -> str | None:
    """The PNG: training time across the top (it has the most bars), then
    half-width panels two to a row: training memory, and the encoding
    section's (one thread per vocabulary, encode_files)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no chart"

    train = [r for r in results.get("train", []) if r.get("status") == "ok"]
    wide = [lambda ax: _train_panel(ax, train, "wall_s")] if train else []
    halves = ([lambda ax: _train_panel(ax, train, "peak_rss_mb")] if train else []) + _encode.chart_panels(results)
    if not wide and not halves:
        return "nothing to chart"
    rows = len(wide) + (len(halves) + 1) // 2
    fig = plt.figure(figsize=(13, 4.3 * rows + 0.3))
    grid = fig.add_gridspec(rows, 2)
    for i, draw in enumerate(wide):
        draw(fig.add_subplot(grid[i, :]))
    for i, draw in enumerate(halves):
        draw(fig.add_subplot(grid[len(wide) + i // 2, i % 2]))
    g = results["machine"]
    changed = f" + {g['git']['changed_files']} changed files" if g["git"].get("changed_files") else ""
    fig.suptitle(f"bpe {g['versions'].get('bpe') or ''} at {g['git']['commit']}{changed}, measured "
                 f"{results.get('started', '')[:10]} — {g['cpu']}, {g['cores']} cores", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _train_panel(ax, train: list[dict], metric: str) -> None:
    """Training wall time (``wall_s``) or peak memory (``peak_rss_mb``) per case and trainer."""
    cases = list(dict.fromkeys((r["corpus"], r["vocab"], r["bytes"]) for r in train))
    tools = list(dict.fromkeys(r["tool"] for r in train))
    groups = [f"{_short(c)}\n{b / MB:.0f} MB, " + (f"{v // 1000}k" if v >= 1000 else f"{v}") for c, v, b in cases]
    bars(ax, groups, tools,
         lambda gi, t: next((r[metric] for r in train if (r["corpus"], r["vocab"], r["bytes"]) == cases[gi]
                             and r["tool"] == t), None),
         "{:.1f}" if metric == "wall_s" else "{:.0f}")
    if metric == "wall_s":
        ax.set_ylabel("seconds (lower is better)")
        ax.set_title("Training, GPT-4 pattern: wall time")
    else:
        ax.set_ylabel("peak RSS, MB (lower is better)")
        ax.set_title("Training: peak memory")


def _short(corpus: str) -> str:
    return {"gutenberg100m": "Gutenberg", "gutenberg10m": "Gutenberg", "code_mix": "code",
            "flores200": "FLORES-200"}.get(corpus, corpus)


# --------------------------------------------------------------------------


def results_text(results: dict) -> str:
    """The markdown report: feeding notes, the tables, the targets."""
    lines = ["# Results", ""]
    probe = results.get("feed_probe") or {}
    for t, f in results.get("train_feed", {}).items():
        how = (", ".join(f"{k} {fmt(v)} s" for k, v in probe[t].items()) + " on 10 MB, vocab 2,000, best of 2"
               if t in probe else "the default; not probed this run")
        lines.append(f"{t} is fed {f} ({how})  ")
    if results.get("train"):
        lines += ["", "### Training", "", train_table(results)]
    for text in (_encode.encode_tables(results), scale_table(results)):
        if text:
            lines += ["", text]
    lines += ["", "### Targets", ""]
    lines += [f"- {verdict} {name}: {numbers}" for verdict, name, numbers in results["targets"] if verdict != "SKIP"]
    skips = [(name, why) for verdict, name, why in results["targets"] if verdict == "SKIP"]
    # A target skipped for a reason (a build without the call, a machine too
    # small) says it; those merely not part of this run are listed by name.
    lines += [f"- SKIP {name}: {why}" for name, why in skips if not why.startswith("not measured")]
    skipped = [name for name, why in skips if why.startswith("not measured")]
    if skipped:
        lines.append(f"- not measured in this run ({len(skipped)}): " + "; ".join(skipped))
    return "\n".join(lines) + "\n"


def write_md(results: dict, path: Path, report: str) -> None:
    m = results["machine"]
    path.write_text(
        f"Measured {results['started']} on {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
        f"bpe at {m['git']['commit']}" + (f" + {m['git']['changed_files']} changed files" if m["git"]["changed_files"] else "")
        + f"; load average before each section: {results.get('load_avg')}; cores free: {results.get('free_cores')}; "
        + f"{results.get('seconds', 0) / 60:.0f} min in all.\n\n" + report)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 10 MB slice only, 1 repeat, fewer anchors, one vocabulary (a few minutes)")
    p.add_argument("--only", help="comma-separated sections: train,encode,many,scale,shards,ray (default: train,encode; "
                                  "many: only the many-thread row of encode, for a many-core machine used briefly)")
    p.add_argument("--scale", action="store_true", help="add the scale section (training from ~1 GB)")
    p.add_argument("--repeats", type=int, help="rounds per measurement (default 3; --quick: 1): the median is "
                                               "reported, the best for one-thread encoding")
    p.add_argument("--files-repeats", type=int,
                   help="rounds of the encode_files and many-thread rows (default: --repeats, at least 5 unless "
                        "--quick): gigatoken's encode_files on this 2-core VM ran anywhere from 190 to 380 MB/s "
                        "from one process to the next, so three rounds left its best, and the ratio, to chance")
    p.add_argument("--scale-repeats", type=int, default=1, help="runs of the 1 GB training (default 1)")
    p.add_argument("--shards-gb", default="5",
                   help="shards section: the generated corpus's size in GB of text; several, comma-separated, "
                        "run one after the other (default 5)")
    p.add_argument("--shards-hf-max-gb", type=float,
                   help="shards section: run HF tokenizers only on corpora up to this size (default: every size)")
    p.add_argument("--ray-workers", default="1,2,4,8,16",
                   help="ray section: worker counts (those past this machine's cores are left out)")
    p.add_argument("--anchors", help=f"comma-separated anchors (default: all; --quick: {','.join(QUICK_ANCHORS)}). "
                                     f"Known: {', '.join(t for t in TOOLS if t != 'bpe')}")
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "corpora"),
                   help="the shared corpora folder (default: ../shared/corpora from the repository root)")
    p.add_argument("--corpus", help="use this one text file for everything instead of the shared corpora")
    p.add_argument("--vocabs", default="50000,8000", help="training vocabulary sizes (default 50000,8000)")
    p.add_argument("--encodings", help="default cl100k_base,o200k_base,r50k_base (--quick: cl100k_base)")
    p.add_argument("--threads", type=int, default=2, help="threads for batch encoding and encode_files (default 2)")
    p.add_argument("--pin-cpu", type=int,
                   help="the CPU the single-thread encoding children are pinned to (default: the last one this "
                        "process may use)")
    p.add_argument("--many-threads", type=int, default=16,
                   help="the many-thread encode_files/encode_batch row: its thread count, measured only on a "
                        "machine with at least that many cores (default 16)")
    p.add_argument("--feed", choices=["lines", "paragraphs", "pieces"],
                   help="how to feed rustbpe/bpeasy (default: probe each way on 10 MB, keep the fastest)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds before one child is stopped (default 1800)")
    p.add_argument("--results", help="folder for latest.json, latest.md and chart.png "
                                     "(default benchmarks/results; --quick/--corpus: benchmarks/results/quick)")
    p.add_argument("--report", metavar="JSON",
                   help="measure nothing: print the tables and targets of a saved latest.json and redraw its chart")
    p.add_argument("--install", action="store_true",
                   help="pip install benchmarks/requirements.txt into this interpreter first")
    args = p.parse_args(argv)
    args.sections = (args.only or "train,encode").split(",")
    if args.scale and "scale" not in args.sections:
        args.sections.append("scale")
    for s in args.sections:
        if s not in ("train", "encode", "many", "scale", "shards", "ray"):
            p.error(f"--only: unknown section {s!r}")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.files_repeats is None:
        args.files_repeats = args.repeats if args.quick else max(5, args.repeats)
    args.vocabs = [int(v.replace("k", "000")) for v in args.vocabs.split(",")]
    try:
        args.shards_gb = [float(g) for g in args.shards_gb.split(",")]
    except ValueError:
        p.error(f"--shards-gb {args.shards_gb}: give sizes in GB, e.g. 5 or 0.2,1")
    if "shards" in args.sections and args.corpus:
        p.error("--only shards generates its corpus from the shared corpora: it does not take --corpus")
    args.encodings = (args.encodings or ("cl100k_base" if args.quick else "cl100k_base,o200k_base,r50k_base")).split(",")
    if args.anchors:
        names = [ALIASES.get(a.strip(), a.strip()) for a in args.anchors.split(",") if a.strip()]
        unknown = [a for a in names if a not in TOOLS or a == "bpe"]
        if unknown:
            p.error(f"--anchors: unknown {', '.join(unknown)}; known: {', '.join(t for t in TOOLS if t != 'bpe')}")
        args.anchor_list = names
    else:
        args.anchor_list = list(QUICK_ANCHORS) if args.quick else [t for t in TOOLS if t != "bpe"]
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if args.pin_cpu is None:
        args.pin_cpu = allowed[-1]
    elif args.pin_cpu not in allowed:
        p.error(f"--pin-cpu {args.pin_cpu}: this process may run on CPUs {allowed} only")
    if args.results is None:
        args.results = str(HERE / "results" / ("quick" if (args.quick or args.corpus) else ""))
    return args


def install_requirements() -> None:
    """Installs each requirement on its own, so one that cannot build here
    (tokendagger needs a C++ compiler and libpcre2-dev) does not stop the rest."""
    req = HERE / "requirements.txt"
    for line in req.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        print(f"pip install {line}", flush=True)
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", line])
        if p.returncode != 0:
            print(f"  could not install {line}; its rows will say so", flush=True)
    # HF tokenizers 1.0 in an environment of its own (see _harness.HF1_REQUIREMENT).
    venv = hf1_python().parent.parent
    print(f"{HF1_REQUIREMENT} into {venv} (a virtual environment that sees this one's packages)", flush=True)
    ok = (hf1_python().exists()
          or subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)]).returncode == 0)
    if not ok or subprocess.run([str(hf1_python()), "-m", "pip", "install", "-q", "--pre",
                                 HF1_REQUIREMENT]).returncode != 0:
        print(f"  could not install {HF1_REQUIREMENT}; its rows will say so", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report:
        results = json.loads(Path(args.report).read_text())
        results["targets"] = targets(results)
        report = results_text(results)
        print(report)
        out = Path(args.results)
        out.mkdir(parents=True, exist_ok=True)
        write_md(results, out / "latest.md", report)
        msg = chart(results, out / "chart.png")
        print(msg or f"wrote {out / 'latest.md'} and {out / 'chart.png'}")
        return 0
    if args.install:
        install_requirements()
        importlib.invalidate_caches()
    t_start = time.perf_counter()
    print("# bpe benchmark\n")
    info = machine_info()
    print_machine(info)
    try:
        import bpe

        if bpe.GPT4_PATTERN != GPT4_PATTERN:
            print("WARNING: bpe.GPT4_PATTERN differs from the pattern the anchors get (benchmarks/_common.py)")
    except Exception as e:  # not installed, or its core not built
        print(f"WARNING: cannot import bpe: {e}")
    print(f"settings: sections {','.join(args.sections)}; repeats {args.repeats}; vocabs {args.vocabs}; "
          f"encodings {args.encodings}; anchors {','.join(args.anchor_list)}; "
          f"every measurement in a fresh process; medians (one-thread encoding: best round); "
          f"ratio > 1 means bpe is faster")
    corp = corpora_for(args)
    results = {"machine": info, "args": {k: v for k, v in vars(args).items()}, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if "train" in args.sections:
        train_section(args, corp, args.anchor_list, results)
    if "encode" in args.sections:
        _encode.encode_section(args, corp, args.anchor_list, results)
    elif "many" in args.sections:
        _encode.many_section(args, corp, args.anchor_list, results)
    if "scale" in args.sections:
        scale_section(args, corp, results)
    if "shards" in args.sections:
        shards_run(args, corp, info)
        if args.sections == ["shards"]:  # its own files: latest.* and the chart are left as they are
            return 0
    if "ray" in args.sections:
        _ray.ray_section(args, corp, info)
        if args.sections == ["ray"]:  # its own files, as shards
            return 0
    results["seconds"] = time.perf_counter() - t_start

    results["targets"] = targets(results)
    report = results_text(results)
    print("\n" + report)

    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=1, default=str))
    write_md(results, out / "latest.md", report)
    msg = chart(results, out / "chart.png")
    print(f"\nwrote {out / 'latest.json'}" + (f"; {msg}" if msg else f" and {out / 'chart.png'}")
          + f" ({results['seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
