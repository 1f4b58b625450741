"""The encoding section of the benchmark (run.py --only encode): what it
measures in which child processes, and its tables, targets and chart panels.

Single-thread figures: every (tool, call, text) is measured in a fresh child
process pinned to one CPU (``os.sched_setaffinity`` in the child, before the
tool is imported, and ``RAYON_NUM_THREADS=1``). The child builds the encoder,
warms it up with one call on the ~10 MB that follow the timed slice in the
same corpus (so a cache that persists across calls never sees the timed
text), then times ONE call on the timed slice. The cold figure is the first
call of a child that was not warmed up. Each figure is the best of
``--repeats`` rounds, tools taking turns within a round. Every tool's ids are
checked against tiktoken's ``encode_ordinary`` on the same text (a SHA-1 of
the uint32 ids).

Then, in unpinned children: batch encoding, decode and short strings on the
first slice (the extras job); encode_files on a ~50 MB file with
``--threads`` threads; and, on a machine with at least ``--many-threads``
cores, encode_files / encode_batch with that many threads against one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _corpora
from _harness import (MB, NOT_INSTALLED, REPO, bars, dist_version, fmt, installed, label, md_table, median_round,
                      plain_label, ratio, run_job, section)
from _worker import CALLS, EXTRAS, FILES

ENCODE_ANCHORS = ["gigatoken", "hf1", "fastokens", "toktok", "tiktoken", "riptoken", "tokendagger", "bpe-openai", "hf"]
# Encoded on the first corpus only, to keep a full run short on 2 cores:
# HF tokenizers (0.4-0.9 MB/s here) and the nice-to-have r50k_base. HF runs
# with cl100k_base only (about 4 minutes per vocabulary on this machine).
FIRST_CORPUS_ONLY = {"hf", "r50k_base"}
HF_ENCODINGS = {"cl100k_base"}
# The encodings the targets, the encode_files row and the chart are about.
MAIN_ENCODINGS = ("cl100k_base", "o200k_base")

SLICE_BYTES = 10 * MB  # each timed slice, and the warm-up slice after it
FILES_BYTES = 50 * MB  # the encode_files row's file

# The single-thread tables' columns: our two calls, then each anchor's
# fastest call (any other anchor measured is added after them).
COLUMNS = [("bpe", "list"), ("bpe", "numpy"), ("gigatoken", None), ("hf1", None), ("fastokens", None),
           ("toktok", None), ("tiktoken", None), ("riptoken", None)]
SHORT_NAMES = {"gutenberg10m": "English", "code_mix10m": "code", "flores200_10m": "multilingual",
               "flores200_cjk": "CJK"}
# FLORES-200's Chinese, Japanese and Korean sections: the CJK row's text.
CJK_LANGUAGES = ("zho_Hans", "zho_Hant", "yue_Hant", "jpn_Jpan", "kor_Hang")


# --------------------------------------------------------------------------
# the texts


def timed_and_warmup(source: Path, name: str) -> dict:
    """The first ~10 MB of ``source`` (cut after a newline) to time, and the
    ~10 MB after it to warm up on, both written once into the bench cache."""
    timed = _corpora.head(source, SLICE_BYTES, f"{name}.txt")
    warmup = _corpora.slice_after(source, timed, SLICE_BYTES, f"{name}.warmup.txt")
    return {"name": name, "source": source.stem, "timed": timed, "warmup": warmup}


def cjk_slices(flores: Path) -> dict:
    """The CJK row: FLORES-200's Chinese, Japanese and Korean sentences,
    the first half of each language's timed and the second half the warm-up
    (about 0.25 MB each: all the CJK text the shared corpora hold)."""
    timed_path = _corpora.cache_dir() / "flores200_cjk.txt"
    warm_path = _corpora.cache_dir() / "flores200_cjk.warmup.txt"
    if not (timed_path.exists() and warm_path.exists()
            and timed_path.stat().st_mtime_ns >= flores.stat().st_mtime_ns):
        sections: dict[str, list[str]] = {}
        current = None
        with open(flores, encoding="utf-8") as f:
            for line in f:
                if line.startswith("===== "):
                    current = next((lang for lang in CJK_LANGUAGES if f"[{lang}]" in line), None)
                elif current:
                    sections.setdefault(current, []).append(line)
        timed, warm = [], []
        for lang in CJK_LANGUAGES:
            lines = sections.get(lang, [])
            timed += lines[:len(lines) // 2]
            warm += lines[len(lines) // 2:]
        for path, lines in ((timed_path, timed), (warm_path, warm)):
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(lines), encoding="utf-8")
            os.replace(tmp, path)
    return {"name": "flores200_cjk", "source": flores.stem + " (zho, yue, jpn, kor)", "timed": timed_path,
            "warmup": warm_path}


def halves(source: Path) -> dict:
    """A small corpus of one's own (--corpus): its first half is timed, the
    rest is the warm-up text."""
    st = source.stat()
    tag = hashlib.sha1(f"{source}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:10]
    timed = _corpora.slice_file(source, 0, max(1, st.st_size // 2), f"custom-{tag}-{source.stem}.timed.txt")
    warmup = _corpora.slice_after(source, timed, st.st_size, f"custom-{tag}-{source.stem}.warmup.txt")
    return {"name": source.stem, "source": source.stem, "timed": timed, "warmup": warmup}


def slices_for(tool: str | None, enc: str, slices: list[dict]) -> list[dict]:
    return slices[:1] if FIRST_CORPUS_ONLY & {tool, enc} else slices


def corpus_kind(name: str) -> str:
    """English, code, CJK or multilingual, for the targets (a text of one's own counts as English)."""
    if name.startswith("code"):
        return "code"
    if name.startswith("flores200_cjk"):
        return "CJK"
    if name.startswith("flores"):
        return "multilingual"
    return "English"


# --------------------------------------------------------------------------
# running the section


def vocab_cache(encodings: list[str]) -> tuple[str | None, list[str]]:
    """TIKTOKEN_CACHE_DIR holding OpenAI's rank files (never downloaded by
    us: tests/fetch_vocabs.py fills it from PyPI packages), and which of
    ``encodings`` it has."""
    def sha1_name(enc):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{enc}.tiktoken"
        return hashlib.sha1(url.encode()).hexdigest()

    d = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("BPE_VOCAB_CACHE") \
        or str(Path.home() / ".cache" / "bpe-test-vocabs")
    if not all((Path(d) / sha1_name(e)).exists() for e in encodings):
        fetch = REPO / "tests" / "fetch_vocabs.py"
        if fetch.exists() and "TIKTOKEN_CACHE_DIR" not in os.environ:
            print(f"vocabulary files missing in {d}: running tests/fetch_vocabs.py")
            p = subprocess.run([sys.executable, str(fetch)], capture_output=True, text=True)
            if p.returncode == 0 and p.stdout.strip():
                d = p.stdout.strip().splitlines()[-1]
            else:
                print(f"  fetch_vocabs.py failed: {(p.stderr or p.stdout).strip()[-300:]}")
    have = [e for e in encodings if (Path(d) / sha1_name(e)).exists()]
    return d, have


def encode_section(args, corp: dict, anchors: list[str], results: dict) -> None:
    section("Encoding (OpenAI vocabularies)", results, "encode")
    cache, have = vocab_cache(args.encodings)
    missing = [e for e in args.encodings if e not in have]
    if missing:
        print(f"no vocabulary file for {', '.join(missing)} in {cache}: skipped "
              f"(run python tests/fetch_vocabs.py)")
    # FASTOKENS_SEGMENT_CACHE would turn on fastokens' cache across calls:
    # unset, as it is by default. RAYON_NUM_THREADS is set per job.
    env = {"TIKTOKEN_CACHE_DIR": cache, "FASTOKENS_SEGMENT_CACHE": None, "RAYON_NUM_THREADS": None}
    tools = ["bpe"] + [a for a in ENCODE_ANCHORS if a in anchors]
    slices = corp["encode"]
    describe_single_thread(args, slices, results)
    enc_results = results.setdefault("encode", {})
    for enc in have:
        by_tool = enc_results[enc] = {}
        # tiktoken's fingerprints first: every tool's ids are checked against
        # them before any of its timings (single_thread).
        refs = results.setdefault("encode_reference", {})[enc] = {
            s["name"]: reference_digest(enc, s["timed"], env, args.timeout) for s in slices_for(None, enc, slices)}
        single_thread(args, enc, tools, slices, env, by_tool, refs)
        extras(args, enc, tools, slices[0], env, by_tool)
        machine_ceiling(args, enc, slices[0], env, by_tool)
    results["encode_corpora"] = [s["name"] for s in slices]
    encodings = [e for e in have if e in MAIN_ENCODINGS]
    files_row(args, corp, tools, encodings, env, results)
    many_threads_row(args, corp, tools, encodings, env, results)


def many_section(args, corp: dict, anchors: list[str], results: dict) -> None:
    """Only the many-thread row (``--only many``): for a many-core machine
    used for a few minutes, where the one-thread tables would take most of
    them."""
    section("Encoding, many threads", results, "many")
    cache, have = vocab_cache(args.encodings)
    env = {"TIKTOKEN_CACHE_DIR": cache, "FASTOKENS_SEGMENT_CACHE": None, "RAYON_NUM_THREADS": None}
    tools = ["bpe"] + [a for a in ENCODE_ANCHORS if a in anchors]
    many_threads_row(args, corp, tools, [e for e in have if e in MAIN_ENCODINGS], env, results)


def describe_single_thread(args, slices: list[dict], results: dict) -> None:
    """Prints how the single-thread figures are taken, and records it."""
    info = {}
    for s in slices:
        t, w = s["timed"].stat().st_size, s["warmup"].stat().st_size
        info[s["name"]] = {"source": s["source"], "timed": [0, t], "warmup": [t, t + w]}
    results["encode_slices"] = info
    results["encode_method"] = {"pin_cpu": args.pin_cpu, "rounds": args.repeats, "statistic": "best"}
    print(f"one thread: first, each tool's ids of each timed text are checked against tiktoken's encode_ordinary "
          f"(SHA-1 of the uint32 ids, in a process of their own; a tool whose ids differ is not timed). Then a "
          f"fresh process per measurement, pinned to CPU {args.pin_cpu} (sched_setaffinity in the child, "
          f"RAYON_NUM_THREADS=1): the encoder is loaded (its load time reported apart), warmed up by one call on "
          f"the slice after the timed one, then ONE call is timed; cold: the first call of a process, no warm-up. "
          f"Best of {args.repeats} round(s), tools in turn. Memory: the process's RSS once loaded, after the call, "
          f"and its peak.")
    for name, s in info.items():
        (a, b), (c, d) = s["timed"], s["warmup"]
        print(f"  {name}: timed bytes {a:,}-{b:,} of {s['source']} ({(b - a) / MB:.1f} MB), "
              f"warm-up bytes {c:,}-{d:,} ({(d - c) / MB:.1f} MB)")
    print(f"then, unpinned: batch ({slices[0]['name']} cut into ~1,000 documents at safe line boundaries, "
          f"{args.threads} threads), short strings (its lines cut to ≤ 64 bytes), decode (its ids). "
          f"MB = 10^6 bytes of UTF-8 input.", flush=True)


def best_round(rounds: list[dict]) -> dict:
    """The fastest round's result, with every round's wall time and speed;
    without one that worked, the last failure."""
    ok = [r for r in rounds if r.get("status") == "ok"]
    if not ok:
        last = rounds[-1]
        return {"status": last.get("status", "error"), "error": last.get("error")}
    best = dict(min(ok, key=lambda r: r["wall_s"]))
    best["walls"] = [r["wall_s"] for r in ok]
    best["rounds_mb_s"] = [r["mb_s"] for r in ok]
    if len(ok) < len(rounds):
        bad = next(r for r in rounds if r.get("status") != "ok")
        best["note"] = f"{len(rounds) - len(ok)} round(s) failed: {bad.get('status')}: {bad.get('error')}"
    return best


def _stopped(dead: dict, tool: str, call: str, key) -> dict | None:
    """The failure that stops this measurement, if any (see ``_bury``)."""
    return dead.get(tool) or dead.get((tool, call)) or dead.get(key)


def _bury(dead: dict, r: dict, tool: str, call: str, key) -> None:
    """Once is enough: a tool not installed is not asked again, a call it
    lacks is not asked again, a measurement that failed is not repeated."""
    s = r.get("status")
    dead[tool if s == "not installed" else (tool, call) if s == "unsupported" else key] = r


def check_ids(args, enc: str, cells: dict, paths: dict, env: dict, refs: dict) -> dict:
    """Before any timing: each (tool, slice, call) encodes the timed text
    once in a child of its own, and its ids' fingerprint is compared with
    tiktoken's. Returns the cells that fail (wrong ids, or an error), with
    the result that says why; those are never timed."""
    failed: dict = {}
    done: dict = {}
    for key in cells:
        t, name, call, _ = key
        ref = (refs.get(name) or {}).get("digest")
        if (t, name, call) not in done:
            job = {"kind": "single", "tool": t, "encoding": enc, "call": call, "cpus": [args.pin_cpu],
                   "text": str(paths[name]["timed"]), "warmup": None, "check_only": True}
            r = run_job(job, args.timeout, env)
            if r.get("status") == "ok" and ref and r["digest"] != ref:
                r = {"status": "ids differ", "error": f"{r['n_ids']:,} ids, not tiktoken's (SHA-1 {r['digest'][:12]} "
                                                       f"against {ref[:12]}): not timed"}
            done[(t, name, call)] = r
            print(f"  {enc} ids check {name} {t} {call}: "
                  f"{'same as tiktoken' if r.get('status') == 'ok' and ref else r.get('status')}", flush=True)
        r = done[(t, name, call)]
        if r.get("status") != "ok":
            failed[key] = r
    return failed


def single_thread(args, enc: str, tools: list[str], slices: list[dict], env: dict, by_tool: dict,
                  refs: dict | None = None) -> None:
    """Every single-text call of every tool on every slice, warm and cold,
    each in a child of its own pinned to one CPU; in each round the tools take
    turns on each slice. The ids are checked first (``check_ids``). Fills
    ``by_tool[tool]["corpora"][slice][mode][call]``."""
    cells: dict[tuple, list] = {}  # (tool, slice, call, mode) -> the rounds' results
    for s in slices:
        for t in tools:
            if (t == "hf" and enc not in HF_ENCODINGS) or s not in slices_for(t, enc, slices):
                continue
            if not installed(t):
                by_tool[t] = {"status": "not installed"}
                continue
            for call in CALLS[t]:
                for mode in ("warm", "cold"):
                    cells[(t, s["name"], call, mode)] = []
    paths = {s["name"]: s for s in slices}
    child_env = dict(env, RAYON_NUM_THREADS="1")
    dead: dict = check_ids(args, enc, cells, paths, child_env, refs or {})
    for round_ in range(1, args.repeats + 1):
        for key in cells:
            t, name, call, mode = key
            if stop := _stopped(dead, t, call, key):
                cells[key].append(stop)
                continue
            t0 = time.perf_counter()
            job = {"kind": "single", "tool": t, "encoding": enc, "call": call, "cpus": [args.pin_cpu],
                   "text": str(paths[name]["timed"]),
                   "warmup": str(paths[name]["warmup"]) if mode == "warm" else None}
            r = run_job(job, args.timeout, child_env)
            cells[key].append(r)
            if r.get("status") == "ok":
                got = f"{r['mb_s']:.1f} MB/s"
            else:
                _bury(dead, r, t, call, key)
                got = f"{r.get('status')}: {r.get('error')}"
            print(f"  {enc} round {round_}/{args.repeats} {name} {t} {call} {mode}: {got} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    for t in dict.fromkeys(k[0] for k in cells):
        mine = {k: v for k, v in cells.items() if k[0] == t and v}
        ok = [r for v in mine.values() for r in v if r.get("status") == "ok"]
        if not ok:
            first = next(r for v in mine.values() for r in v)
            by_tool[t] = {"status": first.get("status", "error"), "error": first.get("error")}
            continue
        entry = by_tool[t] = {"status": "ok", "version": ok[0].get("version"), "corpora": {}}
        if ok[0].get("module"):
            entry["module"] = ok[0]["module"]
        for (_, name, call, mode), rounds in mine.items():
            entry["corpora"].setdefault(name, {}).setdefault(mode, {})[call] = best_round(rounds)


def extras(args, enc: str, tools: list[str], first: dict, env: dict, by_tool: dict) -> None:
    """Batch, decode and short strings on the first slice, for the tools
    that have them: a child per tool and round, unpinned (the batch runs
    ``--threads`` threads); each measurement is the median round's."""
    who = [t for t in tools if t in EXTRAS and (by_tool.get(t) or {}).get("status") == "ok"]
    runs: dict[str, list[dict]] = {t: [] for t in who}
    for round_ in range(1, args.repeats + 1):
        for t, done in runs.items():
            if done and done[-1].get("status") != "ok":
                continue
            t0 = time.perf_counter()
            job = {"kind": "extras", "tool": t, "encoding": enc, "repeats": 1, "threads": args.threads,
                   "corpus": [first["name"], str(first["timed"])], "warmup": str(first["warmup"])}
            # riptoken's and HF's batch calls take no thread count: they use
            # rayon's global pool, sized by this variable.
            r = run_job(job, args.timeout, dict(env, RAYON_NUM_THREADS=str(args.threads)) if t in ("riptoken", "hf")
                        else env)
            done.append(r)
            if r.get("status") == "ok":
                b = r["corpora"][first["name"]].get("batch") or {}
                got = f"batch {b['mb_s']:.1f} MB/s" if "mb_s" in b else f"batch: {b.get('error', '—')}"
            else:
                got = f"{r.get('status')}: {r.get('error')}"
            print(f"  {enc} round {round_}/{args.repeats} {t} batch/decode/short: {got} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    for t, done in runs.items():
        failed = [r for r in done if r.get("status") != "ok"]
        if failed:
            by_tool[t]["extras"] = {"status": failed[0].get("status"), "error": failed[0].get("error")}
            continue
        merged = median_round(done)
        by_tool[t]["corpora"].setdefault(first["name"], {}).update(merged["corpora"][first["name"]])
        by_tool[t]["short"] = merged.get("short")
        if t == "bpe":
            by_tool[t]["batch_scaling"] = paired_scaling(done, first["name"])


def machine_ceiling(args, enc: str, first: dict, env: dict, by_tool: dict) -> None:
    """What this machine's CPUs give together, beside our batch ratio: our
    one-thread call (the ratio's denominator) timed alone on one CPU, and as
    ``--threads`` copies at once, each pinned to its own CPU (`_worker.alongside`),
    each after a warm-up on the warm-up slice. The ceiling is the sum over
    the copies of (time alone / time alongside): ``threads`` on an ideal
    machine, less where the CPUs share a core, caches, memory or a host. The
    rounds alternate which comes first; the median round is reported."""
    ours = by_tool.get("bpe") or {}
    threads = args.threads
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if ours.get("status") != "ok" or threads < 2 or len(cpus) < threads:
        return
    calls = 5

    def at_once(which: list[int]) -> list[dict]:
        sync = tempfile.mkdtemp(prefix="bench-alongside-")
        out: list[dict] = [{}] * len(which)

        def one(k: int) -> None:
            job = {"kind": "alongside", "tool": "bpe", "encoding": enc, "text": str(first["timed"]),
                   "warmup": str(first["warmup"]), "cpus": [which[k]], "calls": calls, "sync": sync,
                   "wait_s": args.timeout}
            out[k] = run_job(job, args.timeout, dict(env, RAYON_NUM_THREADS="1"))

        ts = [threading.Thread(target=one, args=(k,)) for k in range(len(which))]
        for t in ts:
            t.start()
        try:
            # Every copy loaded and warmed: the first call starts after one
            # more of the slowest's warm-up and call, and the gap is twice
            # that, so that no copy's call starts late.
            # (A copy that failed first sends the others off at once: the
            # round is reported as its error.)
            while True:
                ready = [f for f in os.listdir(sync) if f.startswith("ready.") and not f.endswith(".tmp")]
                failed = any(not t.is_alive() for t in ts)
                if len(ready) == len(which) or failed:
                    slowest = max([float(Path(sync, f).read_text()) for f in ready] + [0.0])
                    Path(sync, "go.tmp").write_text(f"{time.time() + slowest + 0.05} {2 * slowest + 0.05}")
                    os.replace(Path(sync, "go.tmp"), Path(sync, "go"))
                    break
                time.sleep(0.01)
            for t in ts:
                t.join()
        finally:
            shutil.rmtree(sync, ignore_errors=True)
        return out

    rounds = []
    for round_ in range(max(1, args.repeats)):
        order = ("alone", "together") if round_ % 2 == 0 else ("together", "alone")
        got = {}
        # Alone: on the CPU the one-thread rows are pinned to.
        lone = args.pin_cpu if args.pin_cpu in cpus else cpus[-1]
        for what in order:
            got[what] = at_once([lone] if what == "alone" else cpus[:threads])
        runs = got["alone"] + got["together"]
        bad = next((r for r in runs if r.get("status") != "ok"), None)
        if bad is not None:
            ours["ceiling"] = {"error": f"{bad.get('status')}: {bad.get('error')}"}
            return
        alone = statistics.median(got["alone"][0]["walls"])
        each = [statistics.median(r["walls"]) for r in got["together"]]
        rounds.append({"ceiling": sum(alone / w for w in each), "alone_s": alone, "together_s": each,
                       "late_s": max(r.get("late_s", 0.0) for r in runs)})
        print(f"  {enc} round {round_ + 1}/{max(1, args.repeats)} machine: {threads} one-thread calls at once "
              f"give {rounds[-1]['ceiling']:.2f}x one", flush=True)
    ceilings = [r["ceiling"] for r in rounds]
    ours["ceiling"] = {"median": statistics.median(ceilings), "rounds": rounds, "threads": threads,
                       "cpus": cpus[:threads]}


def paired_scaling(rounds: list[dict], corpus: str) -> dict | None:
    """Our batch speed over our one-thread speed: the median of the ratios
    of every round's alternations (see `_worker.alternations`: one call and
    one batch, back to back, five times a round), with each round's median
    for the table. Timings seconds apart, even in one child, paired a batch
    timed in a busy moment with a one-thread call timed in a quiet one: on
    this 2-core machine single pairs gave 1.38, 1.76 and 1.43 in the three
    rounds of one run. (Older results, without alternations: each round's
    batch / one ratio.)"""
    every, per_round = [], []
    for r in rounds:
        c = (r.get("corpora") or {}).get(corpus) or {}
        qs = (c.get("scaling") or {}).get("ratios")
        if not qs:
            one, batch = c.get("one") or {}, c.get("batch") or {}
            qs = [batch["mb_s"] / one["mb_s"]] if "mb_s" in one and "mb_s" in batch else []
        if qs:
            every += qs
            per_round.append(statistics.median(qs))
    if not every:
        return None
    return {"median": statistics.median(every), "ratios": per_round, "n": len(every)}


def reference_digest(enc: str, path: Path, env: dict, timeout: float) -> dict | None:
    """tiktoken's ids of ``path`` (encode_ordinary on the whole text) as a
    fingerprint: what every tool's ids are checked against. Computed in a
    child once, then kept in the bench cache by the file's name, size and
    mtime, the encoding and tiktoken's version."""
    if not installed("tiktoken"):
        return None
    st = path.stat()
    key = f"{path.name}|{st.st_size}|{st.st_mtime_ns}|{enc}|tiktoken {dist_version('tiktoken')}"
    store = _corpora.cache_dir() / "tiktoken-digests.json"
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    r = run_job({"kind": "digest", "encoding": enc, "file": str(path)}, timeout, env)
    if r.get("status") != "ok":
        return {"error": f"{r.get('status')}: {r.get('error')}"}
    known[key] = {"digest": r["digest"], "n_ids": r["n_ids"]}
    tmp = store.with_name(store.name + ".tmp")
    tmp.write_text(json.dumps(known, indent=1))
    tmp.replace(store)
    return known[key]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpus_for(threads: int) -> list[int] | None:
    """The first ``threads`` CPUs this process may use (None: not enough to pin)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return allowed[:threads] if 0 < threads <= len(allowed) else None


def files_row(args, corp: dict, tools: list[str], encodings: list[str], env: dict, results: dict) -> None:
    """Ours and gigatoken's encode_files on the ~50 MB file with ``--threads`` threads."""
    path, warm = corp["files"]
    n = args.threads
    cases = [(t, "files", n) for t in FILES if t in tools] + [(t, "files", n, "cold") for t in FILES if t in tools]
    print(f"\nencode_files: {path.name} ({path.stat().st_size / MB:.1f} MB), {n} threads, pinned to CPUs "
          f"{cpus_for(n)}, RAYON_NUM_THREADS={n} (gigatoken sizes its rayon pool from it); warm: one call on "
          f"another file, {warm.name} ({warm.stat().st_size / MB:.1f} MB), then one call timed; cold: the first "
          f"call of the process; best of {args.files_repeats} round(s), the order reversed every other round.",
          flush=True)
    results["encode_files"] = {"file": path.name, "bytes": path.stat().st_size, "warmup": warm.name,
                               "threads": n, "cpus": cpus_for(n),
                               "by_encoding": {e: measure_files(args, e, cases, path, warm, env) for e in encodings}}


def many_threads_row(args, corp: dict, tools: list[str], encodings: list[str], env: dict, results: dict) -> None:
    """On a machine with ``--many-threads`` cores or more: our encode_files
    and encode_batch with that many threads against one, and gigatoken's
    encode_files with that many."""
    n, cores = args.many_threads, usable_cores()
    if cores < n:
        results["encode_many"] = {"threads": n, "skipped": f"this machine has {cores} cores"}
        print(f"\n{n}-thread row: skipped: this machine has {cores} cores", flush=True)
        return
    path, warm = corp["files"]
    cases = [("bpe", "files", n), ("bpe", "files", 1), ("bpe", "batch", n), ("bpe", "batch", 1)]
    cases += [("gigatoken", "files", n)] if "gigatoken" in tools else []
    print(f"\n{n}-thread row: {path.name}, our encode_files and encode_batch (~1,000 documents) with {n} threads "
          f"and with 1, gigatoken's encode_files with {n}; each pinned to its first CPUs.", flush=True)
    results["encode_many"] = {"threads": n, "file": path.name, "bytes": path.stat().st_size,
                              "by_encoding": {e: measure_files(args, e, cases, path, warm, env) for e in encodings}}


def measure_files(args, enc: str, cases: list[tuple], path: Path, warm: Path, env: dict) -> dict:
    """Each (tool, mode, threads) of ``cases`` timed on ``path`` in a child
    pinned to that many CPUs, after a warm-up call on ``warm``; rounds in
    turn (``--files-repeats``), the order of the cases reversed every other
    round so that none always runs first; the best round kept, every round's
    speed with it; and tiktoken's fingerprint of the file."""
    cells: dict[tuple, list] = {c: [] for c in cases}
    dead: dict = {}
    rounds = args.files_repeats
    for round_ in range(1, rounds + 1):
        for case in (cases if round_ % 2 else cases[::-1]):
            tool, mode, threads = case[:3]
            start = case[3] if len(case) > 3 else "warm"
            if stop := _stopped(dead, tool, mode, case):
                cells[case].append(stop)
                continue
            job = {"kind": "files", "tool": tool, "encoding": enc, "mode": mode, "file": str(path),
                   "warmup": str(warm), "warmup_mode": start, "threads": threads, "cpus": cpus_for(threads),
                   "docs": 1000}
            r = run_job(job, args.timeout, dict(env, RAYON_NUM_THREADS=str(threads)))
            cells[case].append(r)
            if r.get("status") == "ok":
                got = f"{r['mb_s']:.1f} MB/s, {r['cores']:.2f} cores"
            else:
                _bury(dead, r, tool, mode, case)
                got = f"{r.get('status')}: {r.get('error')}"
            print(f"  {enc} round {round_}/{rounds} {tool} {mode} {threads} thread(s) {start}: {got}", flush=True)
    runs = [dict(best_round(rs), tool=c[0], mode=c[1], threads=c[2], start=c[3] if len(c) > 3 else "warm")
            for c, rs in cells.items()]
    ref = reference_digest(enc, path, env, args.timeout) if any("digest" in r for r in runs) else None
    return {"runs": runs, "reference": ref}


# --------------------------------------------------------------------------
# reading the results


def calls_of(r: dict, corpus: str, mode: str) -> dict:
    return (((r or {}).get("corpora") or {}).get(corpus) or {}).get(mode) or {}


def best_call(r: dict, corpus: str, mode: str) -> tuple[str | None, dict | None]:
    """A tool's fastest call on ``corpus`` (our figure is the best of our list
    and numpy calls; an anchor's, the best of its calls)."""
    ok = {c: m for c, m in calls_of(r, corpus, mode).items() if m.get("mb_s")}
    if not ok:
        return None, None
    c = max(ok, key=lambda k: ok[k]["mb_s"])
    return c, ok[c]


def best_speed(r: dict, corpus: str, mode: str) -> float | None:
    return (best_call(r, corpus, mode)[1] or {}).get("mb_s")


def _get(r: dict, corpus: str, key: str):
    return (((r or {}).get("corpora") or {}).get(corpus) or {}).get(key)


def reference(results: dict, enc: str, corpus: str) -> str | None:
    """tiktoken's fingerprint of the timed text ``corpus``, if it was taken."""
    ref = ((results.get("encode_reference") or {}).get(enc) or {}).get(corpus)
    return ref.get("digest") if isinstance(ref, dict) else None


def ids_mark(digest: str | None, ref: str | None) -> str:
    if digest is None or ref is None:
        return "?"
    return "✓" if digest == ref else "✗"


def _per_cpu(m: dict):
    """MB per CPU-second: for single-threaded work, steadier than MB/s when
    other processes take the CPU away (cores < 1)."""
    if not m.get("cpu_s") or "mb_s" not in m:
        return None
    return m["mb_s"] * m["wall_s"] / m["cpu_s"]


def measured_corpora(results: dict, enc: str) -> list[str]:
    by = results.get("encode", {}).get(enc, {})
    return [c for c in results.get("encode_corpora", []) if any(calls_of(r, c, "warm") for r in by.values())]


def columns(results: dict) -> list[tuple[str, str | None]]:
    fixed = {t for t, _ in COLUMNS}
    more = [t for by in results.get("encode", {}).values() for t in by if t not in fixed]
    return COLUMNS + [(t, None) for t in dict.fromkeys(more)]


def column_name(tool: str, call: str | None) -> str:
    return f"bpe ({call})" if tool == "bpe" else plain_label(tool)


# --------------------------------------------------------------------------
# tables


def encode_tables(results: dict) -> str:
    if not results.get("encode"):
        return files_tables(results)  # --only many: that row alone
    parts = [single_thread_tables(results), batch_table(results), short_table(results), decode_table(results),
             files_tables(results)]
    return "\n\n".join(p for p in parts if p)


def single_thread_tables(results: dict) -> str:
    m = results.get("encode_method") or {}
    slices = results.get("encode_slices") or {}
    def span(a, b):
        return f"{a:,}–{b:,} ({(b - a) / MB:.1f} MB)"

    rows = [[name, s["source"], span(*s["timed"]), span(*s["warmup"])] for name, s in slices.items()]
    how = (f"Each figure: a fresh process pinned to CPU {m.get('pin_cpu', '?')} (and RAYON_NUM_THREADS=1); the encoder "
           f"is built (untimed), warmed up by one call on the warm-up bytes (never the timed text), then ONE call is "
           f"timed on the timed bytes; best of {m.get('rounds', '?')} round(s), the tools in turn. MB/s of UTF-8 "
           f"input. Before any timing each tool's ids of each timed text were checked against tiktoken's (a tool "
           f"whose ids differ is not timed); ✓: the timed call's ids equal tiktoken's encode_ordinary on the same "
           f"bytes too (SHA-1 of the uint32 ids). Load time and memory: the table of every call. An "
           f"anchor with more than one call shows its fastest, named; ours is the best of list and numpy.")
    parts = ["### Encoding, one thread\n\n" + how + "\n\n" + md_table(
        ["corpus", "source", "timed bytes", "warm-up bytes"], rows)]
    parts.append("#### Warm (MB/s)\n\n" + wide_table(results, "warm"))
    parts.append("#### Cold: the first call of a fresh process, no warm-up (MB/s)\n\n" + wide_table(results, "cold"))
    parts.append("#### Ratios: ours (best of list and numpy) / each tool's best, warm\n\n" + ratio_table(results))
    parts.append("#### Every call\n\n" + detail_table(results))
    return "\n\n".join(parts)


def _cell(results: dict, enc: str, corpus: str, tool: str, call: str | None, mode: str) -> str:
    r = results["encode"][enc].get(tool)
    if r is None:
        return "—"
    if r.get("status") != "ok":
        return r.get("status") or "error"
    if call is not None:
        name, m = call, calls_of(r, corpus, mode).get(call)
    else:
        name, m = best_call(r, corpus, mode)
        if m is None:  # every call failed: say how
            m = next(iter(calls_of(r, corpus, mode).values()), None)
    if m is None:
        return "—"
    if not m.get("mb_s"):
        return m.get("status") or "error"
    named = f" ({name})" if call is None and len(CALLS.get(tool, ())) > 1 else ""
    return f"{m['mb_s']:.1f}{named} {ids_mark(m.get('digest'), reference(results, enc, corpus))}"


def wide_table(results: dict, mode: str) -> str:
    cols = columns(results)
    rows = [[enc, c] + [_cell(results, enc, c, t, call, mode) for t, call in cols]
            for enc in results["encode"] for c in measured_corpora(results, enc)]
    return md_table(["encoding", "corpus"] + [column_name(t, call) for t, call in cols], rows)


def ratio_table(results: dict) -> str:
    anchors = [t for t, _ in columns(results) if t != "bpe"]
    rows = []
    for enc, by in results["encode"].items():
        for c in measured_corpora(results, enc):
            call, ours = best_call(by.get("bpe"), c, "warm")
            cells = []
            for t in anchors:
                theirs = best_speed(by.get(t), c, "warm")
                q = ratio(ours["mb_s"] if ours else None, theirs) if theirs else None
                cells.append("—" if q is None else f"{q:.2f}×")
            rows.append([enc, c, call or "—"] + cells)
    return md_table(["encoding", "corpus", "ours = bpe"] + [plain_label(t) for t in anchors], rows)


def detail_table(results: dict) -> str:
    rows = []
    for enc, by in results["encode"].items():
        for c in measured_corpora(results, enc):
            ref = reference(results, enc, c)
            for t, r in by.items():
                if r.get("status") != "ok":
                    if c == measured_corpora(results, enc)[0]:
                        rows.append([enc, c, label(t), NOT_INSTALLED if r.get("status") == "not installed"
                                     else f"{r.get('status')}: {r.get('error') or ''}"] + [""] * 9)
                    continue
                warm, cold = calls_of(r, c, "warm"), calls_of(r, c, "cold")
                for call in dict.fromkeys([*warm, *cold]):
                    w, k = warm.get(call) or {}, cold.get(call) or {}
                    if not w.get("mb_s"):
                        rows.append([enc, c, label(t), f"{call}: {w.get('status', '—')}: {w.get('error') or ''}"]
                                    + [""] * 9)
                        continue
                    each = ", ".join(f"{x:.1f}" for x in w.get("rounds_mb_s", []))
                    rows.append([enc, c, label(t), w.get("how", call), fmt(w["mb_s"], ".1f"), fmt(_per_cpu(w), ".1f"),
                                 fmt(w.get("cores")), str(w.get("threads", "?")), each,
                                 fmt(k.get("mb_s"), ".1f") if k.get("mb_s") else (k.get("status") or "—"),
                                 fmt(w.get("build_s")), _memory(w), ids_mark(w.get("digest"), ref)])
    return md_table(["encoding", "corpus", "tool", "call", "warm MB/s (best)", "MB/CPU-s", "cores", "threads",
                     "every round, MB/s", "cold MB/s", "load s", "RSS MB: loaded / after / peak",
                     "ids = tiktoken"], rows)


def _memory(m: dict) -> str:
    """Resident memory of a warm measurement's process: once the encoder is
    loaded, once the timed call's ids are freed (tables and caches kept, and
    the texts read), and the peak."""
    if m.get("rss_loaded_mb") is None:
        return fmt(m.get("peak_rss_mb"), ".0f") + " (peak)" if m.get("peak_rss_mb") else "—"
    return " / ".join(fmt(m.get(k), ".0f") for k in ("rss_loaded_mb", "rss_after_mb", "peak_rss_mb"))


def batch_table(results: dict) -> str:
    corpora = results.get("encode_corpora") or [None]
    first = corpora[0]
    rows = []
    for enc, by_tool in results["encode"].items():
        ref = reference(results, enc, first)
        ours_b = _get(by_tool.get("bpe", {}), first, "batch")
        for t, r in by_tool.items():
            if r.get("status") != "ok":
                continue
            if r.get("extras"):
                rows.append([enc, label(t), "", f"{r['extras'].get('status')}: {r['extras'].get('error')}", "", "", ""])
                continue
            for key in ("batch", "batch1"):
                b = _get(r, first, key)
                if not b:
                    continue
                name = label(t) + (" (1 thread)" if key == "batch1" else "")
                if "error" in b:
                    rows.append([enc, name, "", f"error: {b['error']}", "", "", ""])
                    continue
                q = None if t == "bpe" else ratio(ours_b.get("mb_s") if ours_b else None, b["mb_s"])
                rows.append([enc, name, str(b.get("threads")), fmt(b["mb_s"]), fmt(b.get("cores")),
                             ids_mark(b.get("digest"), ref), "—" if q is None else fmt(q)])
        scaling = (by_tool.get("bpe") or {}).get("batch_scaling")
        if scaling:
            each = ", ".join(f"{q:.2f}" for q in scaling["ratios"])
            rows.append([enc, f"bpe: batch / one thread (median of {scaling.get('n', len(scaling['ratios']))} "
                              f"timings in alternation; each round's median)", "",
                         fmt(scaling["median"]) + f"× ({each})", "", "", ""])
        ceiling = (by_tool.get("bpe") or {}).get("ceiling")
        if ceiling and "median" in ceiling:
            each = ", ".join(f"{r['ceiling']:.2f}" for r in ceiling["rounds"])
            rows.append([enc, f"this machine: {ceiling['threads']} of our one-thread calls at once, each on its "
                              f"own CPU, against one alone (the ratio's ceiling; each round)", "",
                         fmt(ceiling["median"]) + f"× ({each})", "", "", ""])
        elif ceiling:
            rows.append([enc, "this machine: one-thread calls at once", "", f"error: {ceiling['error']}", "", "", ""])
    if not rows:
        return ""
    return f"### Encoding, batch ({first}, ~1,000 documents)\n\n" + md_table(
        ["encoding", "tool", "threads", "MB/s", "cores", "ids = tiktoken (whole text)", "ratio (ours / theirs)"], rows)


def short_table(results: dict) -> str:
    rows = []
    enc_res = results["encode"]
    for enc, by_tool in enc_res.items():
        ours = (by_tool.get("bpe") or {}).get("short") or {}
        for t, r in by_tool.items():
            if r.get("status") != "ok" or not r.get("short"):
                continue
            for meth in ("encode", "encode_ordinary"):
                m = r["short"].get(meth)
                if not m:
                    continue
                if "error" in m:
                    rows.append([enc, label(t), meth, f"error: {m['error']}", "", ""])
                    continue
                o = ours.get(meth) or {}
                same = ids_mark(m.get("digest"), o.get("digest"))
                q = None if t == "bpe" else ratio(m["ns_per_call"], o.get("ns_per_call"))
                rows.append([enc, label(t), meth, fmt(m["ns_per_call"], ".0f"), same, "—" if q is None else fmt(q)])
    if not rows:
        return ""
    n = next((r["short"]["n"] for by in enc_res.values() for r in by.values() if r.get("short")), 0)
    return f"### Short strings ({n:,} strings ≤ 64 bytes, one call each from Python)\n\n" + md_table(
        ["encoding", "tool", "call", "ns per call", "ids = ours", "ratio (theirs / ours)"], rows)


def decode_table(results: dict) -> str:
    first = (results.get("encode_corpora") or [None])[0]
    rows = []
    for enc, by_tool in results["encode"].items():
        ours = _get(by_tool.get("bpe", {}), first, "decode")
        for t, r in by_tool.items():
            d = _get(r, first, "decode") if r.get("status") == "ok" else None
            if not d:
                continue
            if "error" in d:
                rows.append([enc, label(t), f"error: {d['error']}", "", "", ""])
                continue
            q = None if t == "bpe" else ratio(ours.get("mb_s") if ours else None, d["mb_s"])
            rows.append([enc, label(t), fmt(d["mb_s"]), fmt(d.get("cores")), "✓" if d.get("roundtrip") else "✗",
                         "—" if q is None else fmt(q)])
    if not rows:
        return ""
    return f"### Decode (ids of {first} to str; MB/s of text out)\n\n" + md_table(
        ["encoding", "tool", "MB/s", "cores", "round trip = text", "ratio (ours / theirs)"], rows)


def files_tables(results: dict) -> str:
    parts = []
    f = results.get("encode_files")
    if f:
        parts.append(f"### encode_files: {f['file']} ({f['bytes'] / MB:.1f} MB), {f['threads']} threads\n\n"
                     f"Each a fresh process pinned to CPUs {f.get('cpus')} with RAYON_NUM_THREADS={f['threads']}, "
                     f"warmed up by one call on another file, {f['warmup']}, then one call timed (reading the file "
                     f"included; it is in the page cache); cold: the first call of the process; best round, every round beside it (the tools' order reversed every "
                     f"other round). A text file without a separator is one document to "
                     f"gigatoken (see its cores).\n\n" + _files_table(f, speedups=False))
    many = results.get("encode_many")
    if many:
        n = many["threads"]
        title = f"### {n} threads"
        if many.get("skipped"):
            parts.append(f"{title}\n\nskipped: {many['skipped']}")
        else:
            parts.append(f"{title}: {many['file']} ({many['bytes'] / MB:.1f} MB)\n\n"
                         + _files_table(many, speedups=True))
    return "\n\n".join(parts)


def _files_table(block: dict, speedups: bool) -> str:
    """Rows of encode_files / encode_batch runs: an anchor's compared with
    ours in the same mode and thread count; with ``speedups``, ours also with
    our own one-thread run in the same mode."""
    rows = []
    for enc, e in block["by_encoding"].items():
        ref = (e.get("reference") or {}).get("digest")
        runs = e["runs"]

        def ours(mode, threads, start="warm"):
            return next((o["mb_s"] for o in runs if (o["tool"], o["mode"], o["threads"], o.get("start", "warm"))
                         == ("bpe", mode, threads, start) and o.get("mb_s")), None)

        for r in runs:
            start = r.get("start", "warm")
            head = [enc, label(r["tool"]), r["mode"] + ("" if start == "warm" else f" ({start})"), str(r["threads"])]
            if not r.get("mb_s"):
                why = NOT_INSTALLED if r.get("status") == "not installed" else f"{r.get('status')}: {r.get('error')}"
                rows.append(head + [why] + [""] * (8 if speedups else 7))
                continue
            q = ratio(ours(r["mode"], r["threads"], start), r["mb_s"]) if r["tool"] != "bpe" else None
            every = ", ".join(f"{x:.0f}" for x in r.get("rounds_mb_s") or [])
            row = head + [r.get("how", ""), fmt(r["mb_s"], ".1f"), every, fmt(r["wall_s"]), fmt(r.get("cores")),
                          str(r.get("threads_seen", "?")), ids_mark(r.get("digest"), ref),
                          "—" if q is None else f"{q:.2f}×"]
            if speedups:
                s = ratio(r["mb_s"], ours(r["mode"], 1)) if r["tool"] == "bpe" and r["threads"] > 1 else None
                row.append("—" if s is None else f"{s:.2f}×")
            rows.append(row)
    return md_table(["encoding", "tool", "mode", "threads", "call", "MB/s", "every round, MB/s", "wall s", "cores",
                     "threads seen", "ids = tiktoken", "ours / theirs"] + (["ours / our 1 thread"] if speedups else []), rows)


# --------------------------------------------------------------------------
# targets


def _target(name: str, pairs: list[tuple[str, float]], need: float, extra: str = "") -> tuple[str, str, str]:
    """PASS when every (corpus, ratio) of ``pairs`` is at least ``need``."""
    if not pairs:
        return ("SKIP", name, "not measured")
    ok = all(q >= need for _, q in pairs)
    return ("PASS" if ok else "FAIL", name, ", ".join(f"{c} {q:.2f}×" for c, q in pairs) + extra)


def _ratios(results: dict, enc: str, anchors: tuple[str, ...], mode: str, kinds: tuple[str, ...] | None = None):
    """(corpus, ours / the fastest of ``anchors``) where both were measured."""
    by = results.get("encode", {}).get(enc, {})
    out = []
    for c in measured_corpora(results, enc):
        if kinds and corpus_kind(c) not in kinds:
            continue
        ours = best_speed(by.get("bpe"), c, mode)
        theirs = [s for a in anchors if (s := best_speed(by.get(a), c, mode))]
        if ours and theirs:
            out.append((c, ours / max(theirs)))
    return out


def targets(results: dict) -> list[tuple[str, str, str]]:
    """(PASS/FAIL/SKIP, target, numbers) of the encoding targets."""
    out = []
    for enc in MAIN_ENCODINGS:
        by = results.get("encode", {}).get(enc, {})
        ours = by.get("bpe", {})
        for anchor, need in (("tiktoken", 3.0), ("riptoken", 2.0)):
            out.append(_target(f"encode {enc} one thread ≥ {need:g}× {anchor}",
                               _ratios(results, enc, (anchor,), "warm"), need))
        out.append(_target(f"encode {enc} one thread ≥ 1.0× gigatoken on every corpus (English, code, "
                           f"multilingual, CJK)", _ratios(results, enc, ("gigatoken",), "warm"), 1.0))
        out.append(_target(f"encode {enc} one thread ≥ 1.15× gigatoken on English",
                           _ratios(results, enc, ("gigatoken",), "warm", ("English",)), 1.15))
        out.append(_target(f"encode {enc} one thread ≥ 1.5× HF tokenizers 1.0 on every corpus",
                           _ratios(results, enc, ("hf1",), "warm"), 1.5))
        out.append(_target(f"encode {enc} one thread ≥ max(fastokens, toktok-rs) on every corpus",
                           _ratios(results, enc, ("fastokens", "toktok"), "warm"), 1.0))
        out.append(_target(f"encode {enc} one thread, cold (first call) ≥ 1.2× gigatoken",
                           _ratios(results, enc, ("gigatoken",), "cold"), 1.2))
        out.append(ids_target(results, enc))
        out += extras_targets(results, enc, ours)
    out += files_targets(results)
    return out


def ids_target(results: dict, enc: str) -> tuple[str, str, str]:
    name = f"encode {enc}: our ids = tiktoken's on every text"
    by = results.get("encode", {}).get(enc, {})
    checked = []
    for c in measured_corpora(results, enc):
        ref = reference(results, enc, c)
        for mode in ("warm", "cold"):
            for call, m in calls_of(by.get("bpe"), c, mode).items():
                if m.get("digest") and ref:
                    checked.append((f"{c} {call} {mode}", m["digest"] == ref))
    if not checked:
        return ("SKIP", name, "not measured")
    bad = [k for k, same in checked if not same]
    return ("PASS" if not bad else "FAIL", name,
            f"{len(checked)} checked" + (f"; differ: {', '.join(bad)}" if bad else ""))


def _ceiling_note(ours: dict) -> str:
    """What the machine's CPUs gave together (`machine_ceiling`), for the
    batch verdict: a ratio is read against it."""
    c = ours.get("ceiling") or {}
    if "median" not in c:
        return ""
    return (f"; this machine's {c['threads']} CPUs gave {c['median']:.2f}× one "
            f"({c['threads']} one-thread calls at once against one alone)")


def extras_targets(results: dict, enc: str, ours: dict) -> list[tuple[str, str, str]]:
    first = (results.get("encode_corpora") or [None])[0]
    by = results.get("encode", {}).get(enc, {})
    out = []
    name = f"encode_batch {enc} 2 threads ≥ 1.8× our one thread"
    scaling, ob = ours.get("batch_scaling"), _get(ours, first, "batch")
    if scaling and ob:
        q = scaling["median"]
        each = ", ".join(f"{x:.2f}" for x in scaling["ratios"])
        out.append(("PASS" if q >= 1.8 else "FAIL", name,
                    f"{q:.2f}× (median of {scaling.get('n', len(scaling['ratios']))} alternated timings of batch "
                    f"and one thread; each round's median: {each}; {ob.get('threads')} threads)"
                    + _ceiling_note(ours)))
    else:
        out.append(("SKIP", name, "not measured"))
    for meth in ("encode", "encode_ordinary"):
        name = f"short strings {enc} {meth} latency ≤ tiktoken"
        o = (ours.get("short") or {}).get(meth) or {}
        a = ((by.get("tiktoken") or {}).get("short") or {}).get(meth) or {}
        if "ns_per_call" in o and "ns_per_call" in a:
            out.append(("PASS" if o["ns_per_call"] <= a["ns_per_call"] else "FAIL", name,
                        f"{o['ns_per_call']:.0f} ns vs {a['ns_per_call']:.0f} ns"))
        else:
            out.append(("SKIP", name, "not measured"))
    name = f"decode {enc} ≥ tiktoken"
    o, a = _get(ours, first, "decode"), _get(by.get("tiktoken", {}), first, "decode")
    if o and a and "mb_s" in o and "mb_s" in a:
        out.append(("PASS" if o["mb_s"] >= a["mb_s"] else "FAIL", name,
                    f"{o['mb_s']:.0f} vs {a['mb_s']:.0f} MB/s ({o['mb_s'] / a['mb_s']:.2f}×)"))
    else:
        out.append(("SKIP", name, "not measured"))
    return out


def _run(block: dict | None, enc: str, tool: str, mode: str, threads: int, start: str = "warm") -> dict | None:
    runs = (((block or {}).get("by_encoding") or {}).get(enc) or {}).get("runs") or []
    return next((r for r in runs if (r["tool"], r["mode"], r["threads"], r.get("start", "warm"))
                 == (tool, mode, threads, start)), None)


def files_targets(results: dict) -> list[tuple[str, str, str]]:
    out = []
    f = results.get("encode_files")
    n = (f or {}).get("threads", 2)
    for enc in MAIN_ENCODINGS:
        for start, need in (("warm", 1.2), ("cold", 1.5)):
            name = f"encode_files {enc} {n} threads, 50 MB, {start} ≥ {need:g}× gigatoken's encode_files"
            o, g = _run(f, enc, "bpe", "files", n, start), _run(f, enc, "gigatoken", "files", n, start)
            out.append(_speedup(name, o, g, need))
    many = results.get("encode_many") or {}
    m = many.get("threads", 16)
    if many.get("skipped"):
        out.append(("SKIP", f"{m} threads: our encode_files and encode_batch ≥ {0.75 * m:g}× our 1 thread, "
                            f"encode_files ≥ gigatoken's", f"skipped: {many['skipped']}"))
        return out
    for enc in MAIN_ENCODINGS:
        for mode in ("files", "batch"):
            out.append(_speedup(f"encode_{mode} {enc} {m} threads ≥ {0.75 * m:g}× our 1 thread",
                                _run(many, enc, "bpe", mode, m), _run(many, enc, "bpe", mode, 1), 0.75 * m))
        out.append(_speedup(f"encode_files {enc} {m} threads ≥ gigatoken's encode_files with {m}",
                            _run(many, enc, "bpe", "files", m), _run(many, enc, "gigatoken", "files", m), 1.0))
    return out


def _speedup(name: str, ours: dict | None, theirs: dict | None, need: float) -> tuple[str, str, str]:
    if not ours or not ours.get("mb_s"):
        return ("SKIP", name, (ours or {}).get("error") or "not measured")
    if not theirs or not theirs.get("mb_s"):
        return ("SKIP", name, "not measured")
    q = ours["mb_s"] / theirs["mb_s"]
    said = f"{q:.2f}× ({ours['mb_s']:.1f} vs {theirs['mb_s']:.1f} MB/s)"
    a, b = ours.get("rounds_mb_s") or [], theirs.get("rounds_mb_s") or []
    if len(a) > 1 and len(b) > 1:
        # Said beside the verdict, which stays best against best: on this
        # VM one tool's rounds can spread far more than the other's.
        ma, mb = statistics.median(a), statistics.median(b)
        said += f"; medians of {len(a)} and {len(b)} rounds {ma / mb:.2f}× ({ma:.1f} vs {mb:.1f} MB/s)"
    return ("PASS" if q >= need else "FAIL", name, said)


# --------------------------------------------------------------------------
# chart


def chart_panels(results: dict) -> list:
    """Half-width chart panels, each a function drawing on a matplotlib axis:
    one-thread warm MB/s per corpus and tool for cl100k_base and o200k_base,
    and encode_files when measured."""
    panels = []
    for enc in MAIN_ENCODINGS:
        by = (results.get("encode") or {}).get(enc)
        corpora = measured_corpora(results, enc) if by else []
        if corpora:
            panels.append(lambda ax, enc=enc, by=by, corpora=corpora: _speed_panel(ax, results, enc, by, corpora))
    f = results.get("encode_files")
    if f and any(r.get("mb_s") for e in f["by_encoding"].values() for r in e["runs"]):
        panels.append(lambda ax: _files_panel(ax, f))
    return panels


def _speed_panel(ax, results: dict, enc: str, by: dict, corpora: list[str]) -> None:
    tools = [t for t in dict.fromkeys(["bpe"] + [t for t, _ in columns(results)])
             if any(best_speed(by.get(t), c, "warm") for c in corpora)]
    bars(ax, [SHORT_NAMES.get(c, c) for c in corpora], tools,
         lambda gi, t: best_speed(by.get(t), corpora[gi], "warm"), "{:.0f}")
    rounds = (results.get("encode_method") or {}).get("rounds", "?")
    ax.set_ylabel("MB/s (higher is better)")
    ax.set_title(f"Encoding {enc}, one thread pinned, warm (best of {rounds}; each tool's fastest call)", fontsize=9)


def _files_panel(ax, f: dict) -> None:
    encs = list(f["by_encoding"])
    tools = list(dict.fromkeys(r["tool"] for e in f["by_encoding"].values() for r in e["runs"] if r.get("mb_s")))
    bars(ax, encs, tools, lambda gi, t: next((r["mb_s"] for r in f["by_encoding"][encs[gi]]["runs"]
                                              if r["tool"] == t and r.get("start", "warm") == "warm"
                                              and r.get("mb_s")), None), "{:.0f}")
    missing = sorted({f"{plain_label(r['tool'])}: {r.get('error')}" for e in f["by_encoding"].values()
                      for r in e["runs"] if not r.get("mb_s")})
    if missing:
        ax.text(0.02, 0.97, "\n".join(missing), transform=ax.transAxes, va="top", fontsize=7)
    ax.set_ylabel("MB/s (higher is better)")
    ax.set_title(f"encode_files, {f['bytes'] / MB:.0f} MB file, {f['threads']} threads, warm", fontsize=9)
