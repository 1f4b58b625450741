"""The benchmark corpora: decompressed once from ../shared/corpora into a cache
directory, checked against the sha256 that ../shared/corpora/README.md lists,
and reused afterwards.

Cache: ~/.cache/bpe-bench/ (override with the environment variable BPE_BENCH_CACHE).
A verified file gets a sidecar "<name>.ok" holding its size, mtime and sha256;
a later run trusts the file while size and mtime still match (hashing 250 MB
on every run would cost seconds for nothing).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

MB = 1_000_000


@dataclass(frozen=True)
class Source:
    name: str  # short name used in tables
    rel: str  # path under the shared corpora folder
    sha256: str  # of the uncompressed content
    size: int  # bytes, uncompressed
    what: str


# sha256 and sizes from ../shared/corpora/README.md.
SOURCES = {
    s.name: s
    for s in (
        Source(
            "gutenberg100m", "bench/gutenberg100m.txt.xz",
            "c85e341de48a5f912958fc9da3db02565fd847984ffba720a8d9cf1c596a20b4", 100_167_464,
            "254 English Project Gutenberg books",
        ),
        Source(
            "enwiki100m", "bench/enwiki2015_extract100m.txt.xz",
            "c24109afa6f1ef9f7c43942b3e6f4ea27660f2a9fbc8867c66f04f71b86e11cc", 100_706_679,
            "English Wikipedia article text (2015 extract)",
        ),
        Source(
            "code_mix", "mid/code_mix.txt.xz",
            "8cc8dcefbe866155f5ee9ccbca7797516f1bb16077dff83248933df5609234cb", 26_043_403,
            "source code: Python, Rust, C, JavaScript",
        ),
        Source(
            "flores200", "mid/flores200_devtest_184langs.txt.xz",
            "1e0a4fbf6beee3c861ab668c2c02c826bcec9828b1239e8b0414123cd374322a", 27_410_418,
            "FLORES-200 devtest, 184 languages",
        ),
    )
}

# The scale file is at least this long (the variable is for testing the
# harness with a small file).
SCALE_BYTES = int(os.environ.get("BPE_BENCH_SCALE_BYTES", 10**9))


def cache_dir() -> Path:
    return Path(os.environ.get("BPE_BENCH_CACHE") or Path.home() / ".cache" / "bpe-bench")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _trusted(path: Path) -> bool:
    ok = path.with_name(path.name + ".ok")
    if not (path.exists() and ok.exists()):
        return False
    try:
        rec = json.loads(ok.read_text())
    except ValueError:
        return False
    st = path.stat()
    return rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns


def _mark_trusted(path: Path, sha: str) -> None:
    st = path.stat()
    rec = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}
    path.with_name(path.name + ".ok").write_text(json.dumps(rec))


def prepare(name: str, shared: Path, log=print) -> Path:
    """The decompressed, verified corpus ``name`` (a key of SOURCES)."""
    src = SOURCES[name]
    out = cache_dir() / (name + ".txt")
    if _trusted(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"  decompressing {src.rel} -> {out} ...")
    tmp = out.with_name(out.name + ".tmp")
    h = hashlib.sha256()
    with lzma.open(shared / src.rel, "rb") as fin, open(tmp, "wb") as fout:
        for block in iter(lambda: fin.read(1 << 22), b""):
            h.update(block)
            fout.write(block)
    sha = h.hexdigest()
    if sha != src.sha256:
        tmp.unlink()
        raise SystemExit(
            f"{shared / src.rel}: the uncompressed sha256 is {sha}, not {src.sha256} "
            f"as ../shared/corpora/README.md says; the shared corpus is damaged or changed."
        )
    tmp.replace(out)
    _mark_trusted(out, sha)
    return out


def head(path: Path, nbytes: int, name: str) -> Path:
    """The first ``nbytes`` of ``path`` or less, cut just after the last
    newline (so no line, and no UTF-8 character, is cut)."""
    return slice_file(path, 0, nbytes, name)


def slice_file(path: Path, start: int, nbytes: int, name: str) -> Path:
    """Bytes ``start`` to ``start + nbytes`` of ``path``, or fewer: cut just
    after the last newline unless the slice reaches the end of the file.
    ``start`` must begin a line (0, or the size of a slice cut before it)."""
    out = cache_dir() / name
    if _trusted(out):
        return out
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(nbytes)
    if len(data) == nbytes and not data.endswith(b"\n"):
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else data.decode("utf-8", "ignore").encode("utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    _mark_trusted(out, hashlib.sha256(data).hexdigest())
    return out


def slice_after(path: Path, before: Path, nbytes: int, name: str) -> Path:
    """The ~``nbytes`` of ``path`` that follow the slice ``before`` (its
    first ``before.stat().st_size`` bytes): the warm-up text of a benchmark
    timed on ``before``, never the timed text itself."""
    return slice_file(path, before.stat().st_size, nbytes, name)


def scale_file(parts: list[Path], log=print) -> tuple[Path, int]:
    """The concatenation of ``parts``, repeated until it is at least
    SCALE_BYTES long. Returns (path, number of repeats)."""
    one = sum(p.stat().st_size for p in parts)
    reps = -(-SCALE_BYTES // one)  # ceil
    out = cache_dir() / f"scale_{'+'.join(p.stem for p in parts)}_x{reps}.txt"
    if _trusted(out):
        return out, reps
    log(f"  writing {out} ({reps} x {one / MB:.0f} MB) ...")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    h = hashlib.sha256()
    with open(tmp, "wb") as fout:
        for _ in range(reps):
            for p in parts:
                with open(p, "rb") as fin:
                    for block in iter(lambda: fin.read(1 << 22), b""):
                        h.update(block)
                        fout.write(block)
    tmp.replace(out)
    _mark_trusted(out, h.hexdigest())
    return out, reps


def max_line_bytes(path: Path) -> int:
    """Length of the longest line in bytes (sentencepiece needs it)."""
    ok = path.with_name(path.name + ".ok")
    rec = json.loads(ok.read_text()) if ok.exists() else {}
    if "max_line_bytes" in rec:
        return rec["max_line_bytes"]
    longest = 0
    with open(path, "rb") as f:
        for line in f:
            longest = max(longest, len(line))
    if rec:
        rec["max_line_bytes"] = longest
        ok.write_text(json.dumps(rec))
    return longest


def shared_missing_message(shared: Path) -> str:
    need = "\n".join(f"  {shared / s.rel}" for s in SOURCES.values())
    return (
        f"benchmark corpora not found: {shared} does not exist (or lacks the files).\n"
        f"run.py needs the project's shared corpora, xz-compressed, at:\n{need}\n"
        f"Point --shared at the folder that holds them, or run on one file of your "
        f"own with --corpus FILE (e.g. --corpus corpora/tinyshakespeare.txt)."
    )


def free_bytes(path: Path) -> int:
    path.mkdir(parents=True, exist_ok=True)
    return shutil.disk_usage(path).free
