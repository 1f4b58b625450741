"""The shards section of the benchmark (run.py --only shards): training from a
corpus held the way people hold one, a directory of JSON Lines shards
compressed with zstd, against the same text as one plain .txt file.

The corpus is generated (never committed) from the shared corpora and cached
under ~/.cache/bpe-bench/shards-<size>g/ (or $BPE_BENCH_CACHE):

- records of 1-20 KB (the size drawn uniformly per record), cut at paragraph
  boundaries (a blank line; where none falls in the window, a line end) from
  gutenberg100m, enwiki100m, code_mix and flores200 (253 MB together);
- as many passes over those 253 MB as the size needs, each cut with its own
  record sizes, then all records shuffled with a fixed seed and taken in that
  order until the size is reached (a size above 253 MB repeats text: no new
  distinct chunks after the first pass, so memory grows less than on fresh
  text of that size);
- written as N shards ``part-00000.jsonl.zst`` ... (about 100 MB of text
  each, zstd level 3), one record a line:
  ``{"text": ..., "meta": {"source": ..., "offset": ..., "pass": ...}}``
  (UTF-8, ``ensure_ascii=False``);
- and the same records, in the same order, as one ``all.txt``, separated by
  a blank line ("\\n\\n").

Every measurement is a fresh child process; its wall time is the whole
process (start to exit: interpreter, imports, reading, counting, merging,
writing the tokenizer) and its peak RSS is the child's ``ru_maxrss`` from
``os.wait4``. Rows:

- bpe: ``bpe train DIR --vocab 50000`` (the shards) and ``bpe train all.txt
  --vocab 50000``, the CLI of the installed bpe; and, when the installed
  ``bpe train --help`` has it, ``--max-memory 512M`` on the shards;
- HF tokenizers: ``train_from_iterator`` over the records, read in the
  child with zstandard + json (``python _shards.py '<job>'``);
- gigatoken: ``train_bpe`` on the shards (its ``JsonlFileSource``, which
  reads .zst itself) and on all.txt (the path: one document).

    python benchmarks/_shards.py --build 0.2      # only generate (or check) the 0.2 GB corpus
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpora  # noqa: E402
from _common import ENDOFTEXT, GPT4_PATTERN  # noqa: E402

RESULT_PREFIX = "@@bench-result@@ "  # the same line _worker.py prints
MB = 1_000_000
GB = 1_000_000_000

FORMAT = 1  # bump when the generator changes: the cache is rebuilt
SOURCES = ("gutenberg100m", "enwiki100m", "code_mix", "flores200")
# BPE_BENCH_SHARD_SOURCES=gutenberg100m: fewer sources (a machine that
# has only some of the shared corpora); the cache key records them.
if os.environ.get("BPE_BENCH_SHARD_SOURCES"):
    SOURCES = tuple(n for n in os.environ["BPE_BENCH_SHARD_SOURCES"].split(",") if n)
SEED = 20261130
MIN_RECORD, MAX_RECORD = 1_000, 20_000
SHARD_TEXT = 100 * MB  # text per shard, about
ZSTD_LEVEL = 3
VOCAB = 50_000
MAX_MEMORY = "512M"
# A cap far below what counting these corpora takes, so that counts do spill
# to files: the exactness check then means something.
MAX_MEMORY_SPILL = "32M"
MAX_MEMORY_RSS_TARGET = 700  # MB, for the --max-memory row
OVERHEAD_TARGET = 1.15  # shards / plain text, count + train


# --------------------------------------------------------------------------
# the corpus


def size_label(gb: float) -> str:
    return f"{gb:g}g"


def cache_folder(gb: float) -> Path:
    return _corpora.cache_dir() / f"shards-{size_label(gb)}"


def cut_records(data: bytes, rng: random.Random) -> list[tuple[int, int]]:
    """(start, end) of the records of one source: each ``MIN_RECORD`` to
    ``size`` bytes (``size`` drawn per record from 1-20 KB), ending after a
    blank line, else after a line end, else (a line longer than the window)
    after the next line end. Newlines at either end are left out."""
    out = []
    p, n = 0, len(data)
    while p < n:
        while p < n and data[p] == 0x0A:  # leading newlines belong to no record
            p += 1
        if p >= n:
            break
        size = rng.randint(MIN_RECORD, MAX_RECORD)
        lo, hi = p + MIN_RECORD, p + size
        if hi >= n:
            cut = n
        else:
            cut = data.rfind(b"\n\n", lo, hi)
            if cut >= 0:
                cut += 2
            else:
                cut = data.rfind(b"\n", lo, hi)
                if cut >= 0:
                    cut += 1
                else:
                    cut = data.find(b"\n", hi)
                    cut = n if cut < 0 else cut + 1
        end = cut
        while end > p and data[end - 1] == 0x0A:
            end -= 1
        if end > p:
            out.append((p, end))
        p = cut
    return out


def _params(gb: float) -> dict:
    return {"format": FORMAT, "gb": gb, "seed": SEED, "sources": list(SOURCES), "record": [MIN_RECORD, MAX_RECORD],
            "shard_text": SHARD_TEXT, "zstd_level": ZSTD_LEVEL}


def cached(gb: float) -> dict | None:
    """The manifest of the cached corpus of ``gb`` GB, if it is there,
    made with the generator's present settings and unchanged since."""
    man_path = cache_folder(gb) / "manifest.json"
    try:
        man = json.loads(man_path.read_text())
    except (OSError, ValueError):
        return None
    return man if man.get("params") == _params(gb) and _files_unchanged(man) else None


def build_in_child(gb: float, shared: Path, timeout: float) -> dict:
    """The corpus, generated (when it is not cached) in a child process:
    generating holds the 253 MB of sources and every record's place, which
    the driver need not keep."""
    man = cached(gb)
    if man is None:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build", f"{gb:g}", str(shared)],
                           timeout=timeout)
        man = cached(gb)
        if p.returncode != 0 or man is None:
            raise SystemExit(f"generating the {gb:g} GB shards corpus failed (exit status {p.returncode})")
    return man


def driver_rss_mb() -> dict:
    """This process's resident memory now and at its peak (MiB)."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def build(gb: float, shared: Path, log=print) -> dict:
    """The corpus of ``gb`` GB of text (built now or found in the cache):
    its manifest, with ``dir`` (the shards), ``txt`` and the figures."""
    folder = cache_folder(gb)
    man_path = folder / "manifest.json"
    want = _params(gb)
    man = cached(gb)
    if man is not None:
        return man
    import zstandard

    srcs = [_corpora.prepare(name, shared, log) for name in SOURCES]
    texts = [p.read_bytes() for p in srcs]
    one_pass = sum(len(t) for t in texts)
    target = int(gb * GB)
    passes = max(1, -(-target // one_pass))
    log(f"  generating {folder}: {gb:g} GB of text from {passes} pass(es) over {one_pass / MB:.0f} MB "
        f"({', '.join(SOURCES)}) ...")
    t0 = time.perf_counter()
    recs = []  # (source index, start, end, pass)
    for k in range(passes):
        for si, data in enumerate(texts):
            rng = random.Random(f"{SEED}/{k}/{SOURCES[si]}")
            recs += [(si, a, b, k) for a, b in cut_records(data, rng)]
    random.Random(SEED).shuffle(recs)

    # Keep records, in the shuffled order, until the text reaches the size.
    chosen, total = [], 0
    for r in recs:
        if total >= target:
            break
        chosen.append(r)
        total += r[2] - r[1]
    n_shards = max(2, round(total / SHARD_TEXT))
    per_shard = -(-len(chosen) // n_shards)

    if folder.exists():
        for old in folder.rglob("*"):
            if old.is_file():
                old.unlink()
    shard_dir = folder / "shards"
    shard_dir.mkdir(parents=True, exist_ok=True)
    txt_path = folder / "all.txt"
    cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=-1)
    by_source = {s: 0 for s in SOURCES}
    sizes = []
    txt_hash = hashlib.sha256()
    with open(txt_path, "wb") as txt:
        for i in range(n_shards):
            part = chosen[i * per_shard:(i + 1) * per_shard]
            path = shard_dir / f"part-{i:05d}.jsonl.zst"
            with open(path, "wb") as fh, cctx.stream_writer(fh, closefd=False) as w:
                buf, tbuf = [], []
                for j, (si, a, b, k) in enumerate(part):
                    raw = texts[si][a:b]
                    text = raw.decode("utf-8")
                    meta = {"source": SOURCES[si], "offset": a, "pass": k}
                    buf.append('{"text": ' + json.dumps(text, ensure_ascii=False)
                               + ', "meta": ' + json.dumps(meta) + "}\n")
                    first = i == 0 and j == 0
                    tbuf.append(raw if first else b"\n\n" + raw)
                    by_source[SOURCES[si]] += b - a
                    if len(buf) >= 2000:
                        w.write("".join(buf).encode("utf-8"))
                        blob = b"".join(tbuf)
                        txt.write(blob)
                        txt_hash.update(blob)
                        buf, tbuf = [], []
                w.write("".join(buf).encode("utf-8"))
                blob = b"".join(tbuf)
                txt.write(blob)
                txt_hash.update(blob)
            sizes.append(path.stat().st_size)
        txt.write(b"\n")
        txt_hash.update(b"\n")
    lengths = [b - a for _, a, b, _ in chosen]
    man = {
        "params": want,
        "dir": str(shard_dir),
        "txt": str(txt_path),
        "txt_sha256": txt_hash.hexdigest(),
        "shards": n_shards,
        "records": len(chosen),
        "text_bytes": total,
        "txt_bytes": txt_path.stat().st_size,
        "zst_bytes": sum(sizes),
        "record_bytes": {"min": min(lengths), "median": sorted(lengths)[len(lengths) // 2], "max": max(lengths)},
        "by_source": by_source,
        "passes": passes,
        "one_pass_bytes": one_pass,
        "files": {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in [txt_path, *sorted(shard_dir.iterdir())]},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    man_path.write_text(json.dumps(man, indent=1))
    log(f"  wrote {n_shards} shards ({man['zst_bytes'] / MB:,.0f} MB zstd) and all.txt "
        f"({man['txt_bytes'] / MB:,.0f} MB), {len(chosen):,} records, in {man['seconds']:.0f} s")
    return man


def parquet_shards(man: dict, log=print) -> str:
    """The same records as Parquet shards (one per .jsonl.zst shard, columns
    ``text`` and ``meta``, zstd-compressed, row groups of 2,000 records),
    made from the JSON Lines shards once and cached beside them: the folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    src = sorted(Path(man["dir"]).glob("*.jsonl.zst"))
    folder = Path(man["dir"]).parent / "parquet"
    stamp = folder / ".made-from"  # hidden: a directory source skips it
    want = {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in src}
    try:
        if json.loads(stamp.read_text()) == want:
            return str(folder)
    except (OSError, ValueError):
        pass
    log(f"  writing {len(src)} Parquet shards to {folder} ...", flush=True)
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.parquet"):
        old.unlink()
    for path in src:
        with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as r:
            lines = io.TextIOWrapper(r, encoding="utf-8")
            records = [json.loads(line) for line in lines]
        table = pa.table({"text": [x["text"] for x in records], "meta": [json.dumps(x["meta"]) for x in records]})
        pq.write_table(table, folder / path.name.replace(".jsonl.zst", ".parquet"), compression="zstd",
                       row_group_size=2000)
    stamp.write_text(json.dumps(want))
    return str(folder)


def _files_unchanged(man: dict) -> bool:
    folder = Path(man.get("txt", "/nonexistent")).parent
    for name, (size, mtime) in (man.get("files") or {"": [0, 0]}).items():
        p = folder / name if name == "all.txt" else folder / "shards" / name
        try:
            st = p.stat()
        except OSError:
            return False
        if st.st_size != size or st.st_mtime_ns != mtime:
            return False
    return True


# --------------------------------------------------------------------------
# one child process


def _dir_bytes(folder: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


# The measured command's parent: a small Python (no site, ~10 MB) that forks
# and execs it, waits for it, and writes its wall time and rusage as JSON to
# the file named first. Why not wait4 on a child of the driver: Linux starts
# an exec'd child's ru_maxrss at the peak of the process it was forked (or
# vforked) from, so a driver that once held 800 MB of pyarrow made every
# child "peak" at 800 MB. Forked from this launcher, the child's peak starts
# at the launcher's ~10 MB (checked: 800 MB driver, 50 MB child: 813 MB
# direct, 63 MB through the launcher).
LAUNCHER = r"""
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    json.dump({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss,
               "exit": os.waitstatus_to_exitcode(status)}, f)
"""


def run_child(cmd: list[str], timeout: float, cwd: str | None = None, tmpdir: str | None = None) -> dict:
    """Runs ``cmd`` as a fresh process, through ``LAUNCHER``: its wall time
    from fork to exit, its CPU time and its own peak RSS (``ru_maxrss`` from
    ``os.wait4`` in the launcher), and the JSON line it printed after
    RESULT_PREFIX, if any. With ``tmpdir`` (a new empty folder), the child's
    TMPDIR: the most bytes seen in it while it ran (polled every 50 ms) are
    ``tmp_max_mb`` (spilled counts)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed bpe, never the source folder
    if tmpdir:
        env["TMPDIR"] = tmpdir
    tmp_max = 0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as report:
        t0 = time.perf_counter()
        # A session of its own, so that a timeout kills the command with its launcher.
        p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, report.name, *cmd], stdout=out, stderr=err,
                             cwd=cwd, env=env, start_new_session=True)
        while p.poll() is None:
            if tmpdir:
                tmp_max = max(tmp_max, _dir_bytes(tmpdir))
            if time.perf_counter() - t0 > timeout:
                os.killpg(p.pid, 9)
                p.wait()
                return {"status": "timeout", "error": f"timed out after {timeout:.0f} s"}
            time.sleep(0.05)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
        try:
            ru = json.loads(Path(report.name).read_text())
        except ValueError:
            return {"status": "error", "error": f"the launcher failed (exit status {p.returncode}): "
                                                f"{' | '.join(stderr.strip().splitlines()[-3:])}"[:500]}
    wall = ru["wall_s"]
    p.returncode = ru["exit"]
    r = {"wall_s": wall, "cpu_s": ru["cpu_s"], "peak_rss_mb": ru["maxrss_kib"] / 1024}
    r["cores"] = r["cpu_s"] / wall if wall > 0 else None
    r["stderr_tail"] = stderr.strip().splitlines()[-3:]
    if tmpdir:
        r["tmp_max_mb"] = tmp_max / 2**20
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            r.update(json.loads(line[len(RESULT_PREFIX):]))
    if p.returncode != 0:
        why = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit status {p.returncode}"
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        return {**r, "status": r.get("status") if r.get("status") not in (None, "ok") else "error",
                "error": r.get("error") or f"{why}: {tail}"[:500]}
    r.setdefault("status", "ok")
    return r


def child(job: dict) -> dict:
    """In the child: one anchor's training, timed around the call."""
    tool, vocab = job["tool"], job["vocab"]
    t0 = time.perf_counter()
    if tool == "hf":
        try:
            import tokenizers
            import zstandard
        except ImportError as e:
            return {"status": "not installed", "error": str(e)}
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT4_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[ENDOFTEXT],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        paths = sorted(str(p) for p in Path(job["dir"]).iterdir() if p.name.endswith(".jsonl.zst"))

        def records():
            # What an HF user writes: decompress each shard, parse each line,
            # yield its text.
            for path in paths:
                with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as raw:
                    for line in io.TextIOWrapper(raw, encoding="utf-8"):
                        yield json.loads(line)["text"]

        t0 = time.perf_counter()
        tok.train_from_iterator(records(), trainer)
        wall = time.perf_counter() - t0
        return {"call_s": wall, "version": tokenizers.__version__, "final_vocab": tok.get_vocab_size()}
    if tool == "gigatoken":
        try:
            import gigatoken
        except ImportError as e:
            return {"status": "not installed", "error": str(e)}
        from importlib import metadata

        if job.get("txt"):
            src = Path(job["txt"])  # as the train section feeds it: the path, one document
        else:
            paths = sorted(str(p) for p in Path(job["dir"]).iterdir() if p.name.endswith(".jsonl.zst"))
            src = gigatoken.JsonlFileSource(paths, field="text")
        t0 = time.perf_counter()
        v, _merges = gigatoken.train_bpe(src, vocab, [ENDOFTEXT])
        wall = time.perf_counter() - t0
        return {"call_s": wall, "version": metadata.version("gigatoken"), "final_vocab": len(v)}
    raise ValueError(f"unknown tool {tool!r}")


def child_main(arg: str) -> None:
    import traceback

    try:
        result = child(json.loads(arg))
        result.setdefault("status", "ok")
    except Exception as e:
        traceback.print_exc()
        result = {"status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------
# the section


def bpe_cli() -> list[str]:
    exe = Path(sys.executable).with_name("bpe")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bpe"]


def has_max_memory() -> bool:
    p = subprocess.run(bpe_cli() + ["train", "--help"], capture_output=True, text=True,
                       cwd=tempfile.gettempdir(), env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return "--max-memory" in p.stdout


def rows_for(man: dict, out: Path, vocab: int, max_mem: bool, anchors: list[str]) -> list[dict]:
    """The measurements of one corpus: name, what it reads, tool, command."""
    d, txt = man["dir"], man["txt"]
    me = Path(__file__).resolve()
    cli = bpe_cli()
    rows = [
        {"key": "bpe-shards", "tool": "bpe", "input": "shards (.jsonl.zst)", "ours": True,
         "cmd": cli + ["train", d, "--vocab", str(vocab), "-o", str(out / "shards.bpe")]},
        {"key": "bpe-txt", "tool": "bpe", "input": "all.txt", "ours": True,
         "cmd": cli + ["train", txt, "--vocab", str(vocab), "-o", str(out / "txt.bpe")]},
    ]
    if man.get("parquet"):
        rows.append({"key": "bpe-parquet", "tool": "bpe", "input": "shards (.parquet)", "ours": True,
                     "cmd": cli + ["train", man["parquet"], "--vocab", str(vocab), "-o", str(out / "parquet.bpe")]})
    if max_mem:
        for key, cap in (("bpe-shards-maxmem", MAX_MEMORY), ("bpe-shards-spill", MAX_MEMORY_SPILL)):
            rows.append({"key": key, "tool": "bpe", "input": "shards (.jsonl.zst)", "ours": True, "cap": cap,
                         "cmd": cli + ["train", d, "--vocab", str(vocab), "--max-memory", cap,
                                       "-o", str(out / f"{key}.bpe")]})
    if "hf" in anchors:
        rows.append({"key": "hf-shards", "tool": "hf", "input": "shards: records via zstandard + json",
                     "cmd": [sys.executable, str(me), json.dumps({"tool": "hf", "vocab": vocab, "dir": d})]})
    if "gigatoken" in anchors:
        rows.append({"key": "gigatoken-shards", "tool": "gigatoken", "input": "shards (JsonlFileSource)",
                     "cmd": [sys.executable, str(me), json.dumps({"tool": "gigatoken", "vocab": vocab, "dir": d})]})
        rows.append({"key": "gigatoken-txt", "tool": "gigatoken", "input": "all.txt (the path)",
                     "cmd": [sys.executable, str(me), json.dumps({"tool": "gigatoken", "vocab": vocab, "txt": txt})]})
    return rows


def shards_section(args, shared: Path, results: dict, log=print, folder: Path | None = None) -> dict:
    """Generates (or finds) each corpus of ``args.shards_gb`` and measures
    every row on it; returns the section's results (also put in
    ``results["shards"]``). With ``folder``, the report so far is written
    there after each size (a long run cut short keeps what it measured)."""
    t0 = time.perf_counter()
    anchors = [a for a in ("hf", "gigatoken") if a in args.anchor_list]
    max_mem = has_max_memory()
    sec = {"vocab": VOCAB, "max_memory_flag": max_mem, "repeats": args.repeats, "sizes": []}
    if not max_mem:
        log("  the installed `bpe train --help` has no --max-memory: that row is skipped")
    results["shards"] = sec
    for gb in args.shards_gb:
        man = build_in_child(gb, shared, args.timeout)
        try:
            man = dict(man, parquet=parquet_shards(man, log))
        except ImportError:
            log("  no pyarrow/zstandard here: the Parquet row is skipped")
        size = {"gb": gb, "manifest": {k: v for k, v in man.items() if k not in ("files",)}, "rows": [],
                "driver_rss_mb": driver_rss_mb()}
        log(f"  driver process: {size['driver_rss_mb'].get('VmRSS', 0):.0f} MB resident (the children are "
            f"started from a small launcher, so their peaks do not include it)", flush=True)
        sec["sizes"].append(size)
        with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
            out = Path(tmp)
            rows = rows_for(man, out, VOCAB, max_mem, anchors)
            hf_ok = args.shards_hf_max_gb is None or gb <= args.shards_hf_max_gb
            runs = {r["key"]: [] for r in rows}
            fails = {}
            for r in rows:
                if r["tool"] == "hf" and not hf_ok:
                    fails[r["key"]] = {"status": "skipped",
                                       "error": f"HF runs only up to {args.shards_hf_max_gb:g} GB (--shards-hf-max-gb)"}
            # Ours: --repeats rounds, round robin; the anchors once each
            # (minutes each), after the first round.
            for rep in range(args.repeats):
                for r in rows:
                    if r["key"] in fails or (not r.get("ours") and rep > 0):
                        continue
                    spill = None
                    if r.get("ours"):
                        spill = tempfile.mkdtemp(prefix=f"{r['key']}-tmp-", dir=tmp)
                    res = run_child(r["cmd"], args.timeout, cwd=tmp, tmpdir=spill)
                    if res.get("status") != "ok":
                        fails[r["key"]] = res
                        log(f"  {gb:g} GB {r['key']}: {res.get('status')}: {res.get('error')}")
                        continue
                    runs[r["key"]].append(res)
                    log(f"  {gb:g} GB {r['key']} run {rep + 1}: {res['wall_s']:.1f} s wall, {res['cores']:.2f} cores, "
                        f"{res['peak_rss_mb']:.0f} MB" + (f", TMPDIR up to {res['tmp_max_mb']:.0f} MB"
                                                          if res.get("tmp_max_mb") else ""), flush=True)
                    if r.get("ours"):
                        name = Path(r["cmd"][r["cmd"].index("-o") + 1])
                        res["sha256"] = hashlib.sha256(name.read_bytes()).hexdigest()
                        # Its summary line (no progress bar: stderr is not a terminal):
                        # "wrote FILE: N tokens (M merges, S special), pattern P".
                        m = re.search(r": (\d+) tokens \(", " ".join(res.get("stderr_tail") or []))
                        res["final_vocab"] = int(m.group(1)) if m else None
            for r in rows:
                rs = runs[r["key"]]
                row = {k: r[k] for k in ("key", "tool", "input")}
                row["command"] = _shown(r["cmd"], man)
                if not rs:
                    row.update(status=fails.get(r["key"], {}).get("status", "error"),
                               error=fails.get(r["key"], {}).get("error"))
                else:
                    walls = sorted(x["wall_s"] for x in rs)
                    mid = sorted(rs, key=lambda x: x["wall_s"])[(len(rs) - 1) // 2]
                    row.update(status="ok", n=len(rs), wall_s=mid["wall_s"], cpu_s=mid["cpu_s"], cores=mid["cores"],
                               peak_rss_mb=max(x["peak_rss_mb"] for x in rs), walls=walls,
                               call_s=mid.get("call_s"), final_vocab=mid.get("final_vocab"),
                               version=mid.get("version"), tmp_max_mb=max((x.get("tmp_max_mb") or 0) for x in rs))
                    shas = {x.get("sha256") for x in rs if x.get("sha256")}
                    if shas:
                        row["sha256"] = sorted(shas)
                size["rows"].append(row)
        if folder is not None:
            results["seconds"] = time.perf_counter() - t0
            write(results, folder)
    return sec


def _shown(cmd: list[str], man: dict) -> str:
    """The command as the report shows it: paths shortened."""
    folder = str(Path(man["txt"]).parent)
    out = []
    for c in cmd:
        c = c.replace(folder, "$SHARDS")
        if c.startswith(tempfile.gettempdir()) and c.endswith(".bpe"):
            c = Path(c).name
        if c == sys.executable:
            c = "python"
        elif c.endswith(os.sep + "bpe") and Path(c).name == "bpe":
            c = "bpe"
        elif c.endswith("_shards.py"):
            c = "benchmarks/_shards.py"
        out.append(f"'{c}'" if c.startswith("{") else c)
    return " ".join(out)


# --------------------------------------------------------------------------
# the report


def _row(size: dict, key: str) -> dict | None:
    r = next((x for x in size["rows"] if x["key"] == key), None)
    return r if r and r.get("status") == "ok" else None


def targets(sec: dict) -> list[tuple[str, str, str]]:
    out = []
    for size in sec["sizes"]:
        gb = f"{size['gb']:g} GB"
        shards, txt, mm = _row(size, "bpe-shards"), _row(size, "bpe-txt"), _row(size, "bpe-shards-maxmem")
        name = f"{gb}: bpe train on .jsonl.zst shards ≤ {OVERHEAD_TARGET:.2f}× the same text as plain .txt"
        if shards and txt:
            q = shards["wall_s"] / txt["wall_s"]
            out.append(("PASS" if q <= OVERHEAD_TARGET else "FAIL", name,
                        f"{q:.3f}× ({shards['wall_s']:.1f} s vs {txt['wall_s']:.1f} s, medians of {shards['n']})"))
        else:
            out.append(("SKIP", name, "not measured"))
        pq_row = _row(size, "bpe-parquet")
        name = f"{gb}: bpe train on .parquet shards ≤ {OVERHEAD_TARGET:.2f}× the same text as plain .txt"
        if pq_row and txt:
            q = pq_row["wall_s"] / txt["wall_s"]
            same = pq_row.get("sha256") == (shards or {}).get("sha256")
            out.append(("PASS" if q <= OVERHEAD_TARGET else "FAIL", name,
                        f"{q:.3f}× ({pq_row['wall_s']:.1f} s vs {txt['wall_s']:.1f} s, medians of {pq_row['n']}); "
                        f"the tokenizer {'identical to' if same else 'DIFFERS from'} the .jsonl.zst shards' one"))
        name = f"{gb}: --max-memory {MAX_MEMORY}: the tokenizer file identical to the unbounded run's"
        name2 = f"{gb}: --max-memory {MAX_MEMORY}: peak RSS ≤ {MAX_MEMORY_RSS_TARGET} MB"
        if not sec["max_memory_flag"]:
            out.append(("SKIP", name, "the installed bpe train has no --max-memory"))
            out.append(("SKIP", name2, "the installed bpe train has no --max-memory"))
        elif mm and shards:
            same = mm.get("sha256") == shards.get("sha256") and len(mm.get("sha256") or []) == 1
            out.append(("PASS" if same else "FAIL", name,
                        "identical bytes (sha256 " + (mm.get("sha256") or ["?"])[0][:12] + ")" if same else
                        f"differ: {mm.get('sha256')} vs {shards.get('sha256')}"))
            out.append(("PASS" if mm["peak_rss_mb"] <= MAX_MEMORY_RSS_TARGET else "FAIL", name2,
                        f"{mm['peak_rss_mb']:.0f} MB (unbounded: {shards['peak_rss_mb']:.0f} MB)"))
            sp = _row(size, "bpe-shards-spill")
            if sp:
                same = sp.get("sha256") == shards.get("sha256") and len(sp.get("sha256") or []) == 1
                out.append(("PASS" if same else "FAIL",
                            f"{gb}: --max-memory {MAX_MEMORY_SPILL} (counts spill to TMPDIR): the tokenizer file "
                            "identical to the unbounded run's",
                            ("identical bytes" if same else f"differ: {sp.get('sha256')} vs {shards.get('sha256')}")
                            + f"; TMPDIR up to {sp.get('tmp_max_mb') or 0:.0f} MB, peak RSS "
                            f"{sp['peak_rss_mb']:.0f} MB"))
        else:
            out.append(("SKIP", name, "not measured"))
    return out


def report(results: dict) -> str:
    from _harness import fmt, md_table

    sec = results["shards"]
    m = results["machine"]
    g = m["git"]
    lines = [
        "# Training from JSON Lines shards (.jsonl.zst) — `run.py --only shards`",
        "",
        f"Measured {results['started']} on {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB, Python {m['python']}, "
        f"{m['platform']}; bpe {m['versions'].get('bpe')} at commit {g['commit']}"
        + (f" + {g['changed_files']} changed files" if g.get("changed_files") else "")
        + f"; tokenizers {m['versions'].get('tokenizers')}, gigatoken {m['versions'].get('gigatoken')}; "
        f"load average before: {results.get('load_avg', {}).get('shards')}, cores free: "
        f"{results.get('free_cores', {}).get('shards')}; {results.get('seconds', 0) / 60:.0f} min in all.",
        "",
        f"Command: `{results.get('command', 'python benchmarks/run.py --only shards')}`",
        "",
        f"Vocabulary {sec['vocab']:,} (GPT-4 split pattern; gigatoken has no pattern argument and uses its own). "
        "Each figure is a fresh process: **wall s** from its start to its exit (interpreter, imports, reading, "
        "counting, merges, writing the tokenizer), **peak RSS** its `ru_maxrss` (MiB, from `os.wait4`). "
        f"bpe's rows: the median of {sec['repeats']} runs, round robin (peak RSS: the largest); the anchors: one run "
        "each. **call s**: the anchor's own timing of its training call inside the child. "
        "**ratio**: that row's wall time / bpe's on the same input (shards for shards, .txt for .txt); "
        "above 1 means bpe is faster.",
        "",
        "How the corpus is made (`benchmarks/_shards.py`, cached in `~/.cache/bpe-bench/shards-<size>g/`, never "
        "committed): records of 1–20 KB cut at paragraph boundaries (a blank line, else a line end) from "
        f"{', '.join(SOURCES)} (one pass: see each size), as many passes as the size needs (each cut "
        "with its own record sizes), shuffled with a fixed seed; written as shards of ~100 MB of text, "
        '`{"text": ..., "meta": {"source", "offset", "pass"}}` per line (UTF-8, not ASCII-escaped), zstd level 3; '
        "and the same records as one `all.txt`, separated by blank lines. Sizes above one pass repeat text, so "
        "they add no distinct chunks after the first pass: memory grows less than it would on fresh text.",
        "",
    ]
    for size in sec["sizes"]:
        man = size["manifest"]
        lines += [f"## {size['gb']:g} GB", "",
                  f"{man['records']:,} records (median {man['record_bytes']['median']:,} B, "
                  f"{man['record_bytes']['min']:,}–{man['record_bytes']['max']:,} B) from {man['passes']} pass(es); "
                  f"text {man['text_bytes'] / MB:,.0f} MB (" + ", ".join(
                      f"{k} {v / MB:,.0f}" for k, v in man["by_source"].items()) + f" MB); "
                  f"{man['shards']} shards, {man['zst_bytes'] / MB:,.0f} MB of zstd; all.txt "
                  f"{man['txt_bytes'] / MB:,.0f} MB. Each command runs under a small launcher (`LAUNCHER`), "
                  "so its peak RSS is its own, not the driver's "
                  f"({size.get('driver_rss_mb', {}).get('VmRSS', 0):.0f} MB when it started them).", ""]
        rows = []
        for r in size["rows"]:
            who = {"bpe": "**bpe (us)**", "hf": "HF tokenizers `train_from_iterator`",
                   "gigatoken": "gigatoken `train_bpe`"}[r["tool"]]
            if r["key"] == "bpe-shards-maxmem":
                who += f" `--max-memory {MAX_MEMORY}`"
            if r["key"] == "bpe-shards-spill":
                who += f" `--max-memory {MAX_MEMORY_SPILL}`"
            if r.get("status") != "ok":
                rows.append([who, r["input"], f"{r.get('status')}: {r.get('error') or ''}", "", "", "", "", "", "",
                             f"`{r['command']}`"])
                continue
            ref = _row(size, "bpe-txt" if "txt" in r["key"] else "bpe-shards")
            q = "—" if r["tool"] == "bpe" else fmt(r["wall_s"] / ref["wall_s"] if ref else None)
            rows.append([who, r["input"], fmt(r["wall_s"], ".1f"), fmt(r.get("call_s"), ".1f"), fmt(r["cores"]),
                         fmt(r["peak_rss_mb"], ".0f"), f"{man['text_bytes'] / MB / r['wall_s']:.1f}",
                         f"{r['final_vocab']:,}" if r.get("final_vocab") else "—", q, f"`{r['command']}`"])
        lines += [md_table(["trainer", "reads", "wall s", "call s", "cores", "peak RSS MB", "MB/s", "final vocab",
                            "ratio (their time / ours)", "command"], rows), ""]
        shards, txt = _row(size, "bpe-shards"), _row(size, "bpe-txt")
        notes = []
        if shards and txt:
            notes.append(f"bpe, shards / plain text: time {shards['wall_s'] / txt['wall_s']:.3f}× "
                         f"(runs: shards {', '.join(f'{w:.1f}' for w in shards['walls'])} s; txt "
                         f"{', '.join(f'{w:.1f}' for w in txt['walls'])} s), peak RSS "
                         f"{shards['peak_rss_mb'] / txt['peak_rss_mb']:.2f}×. The two tokenizers "
                         + ("are identical." if shards.get("sha256") == txt.get("sha256") else
                            "differ slightly, as they should: in all.txt the blank line between records joins the "
                            "text around it (e.g. a final `.` and the `\\n\\n` after it are one chunk), while each "
                            "record of the shards is a document of its own."))
        for key, cap in (("bpe-shards-maxmem", MAX_MEMORY), ("bpe-shards-spill", MAX_MEMORY_SPILL)):
            row = _row(size, key)
            if row and shards:
                notes.append(
                    f"`--max-memory {cap}`: time {row['wall_s'] / shards['wall_s']:.2f}× the unbounded run, peak RSS "
                    f"{row['peak_rss_mb']:.0f} MB vs {shards['peak_rss_mb']:.0f} MB, its TMPDIR (spilled counts) up "
                    f"to {row.get('tmp_max_mb') or 0:.0f} MB (polled every 50 ms; 0: nothing spilled); the tokenizer "
                    "file " + ("is byte-identical." if row.get("sha256") == shards.get("sha256") else "DIFFERS."))
        if not sec["max_memory_flag"]:
            notes.append(f"`--max-memory {MAX_MEMORY}` row skipped: the installed `bpe train --help` has no "
                         "`--max-memory` (another change adds it).")
        g_sh, g_tx = _row(size, "gigatoken-shards"), _row(size, "gigatoken-txt")
        if g_sh and g_tx:
            notes.append(f"gigatoken reads the .jsonl.zst shards itself (`JsonlFileSource(paths, field=\"text\")`, "
                         f"zstd detected from the name): shards / plain text {g_sh['wall_s'] / g_tx['wall_s']:.2f}× "
                         f"its own time.")
        hf = next((x for x in size["rows"] if x["key"] == "hf-shards"), None)
        if hf and hf.get("status") == "skipped":
            notes.append(f"HF tokenizers not run at this size: {hf.get('error')}.")
        lines += [f"- {n}" for n in notes] + [""]
    lines += ["## Targets", ""] + [f"- {v} {n}: {x}" for v, n, x in targets(sec)]
    return "\n".join(lines) + "\n"


def write(results: dict, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "shards.json").write_text(json.dumps(results, indent=1, default=str))
    md = folder / "shards.md"
    md.write_text(report(results))
    return md


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--build":  # --build GB [SHARED]
        shared = Path(sys.argv[3]) if len(sys.argv) == 4 else Path(__file__).resolve().parents[2] / "shared" / "corpora"
        man = build(float(sys.argv[2]), shared)
        print(f"  {man['dir']}: {man['shards']} shards, {man['zst_bytes'] / MB:,.0f} MB of zstd; "
              f"{man['txt']}: {man['txt_bytes'] / MB:,.0f} MB", flush=True)
    else:
        child_main(sys.argv[1])
