"""What the benchmark driver's sections share: the tools and their
versions, running one job in a child process, merging rounds, the load
printout, and the pieces of the markdown tables and the chart.

run.py (options, training, scale, the report) and _encode.py (the encoding
section) both import it; it imports neither.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from _worker import RESULT_PREFIX

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = HERE / "_worker.py"
MB = 1_000_000

# name -> (importable module, distribution name for the version)
TOOLS = {
    "bpe": ("bpe", "bpe"),
    "rustbpe": ("rustbpe", "rustbpe"),
    "bpeasy": ("bpeasy", "bpeasy"),
    "hf": ("tokenizers", "tokenizers"),
    "sentencepiece": ("sentencepiece", "sentencepiece"),
    "tiktoken": ("tiktoken", "tiktoken"),
    "riptoken": ("riptoken", "riptoken"),
    "tokendagger": ("tokendagger", "tokendagger"),
    "bpe-openai": ("bpe_openai", "bpe-openai"),
    "gigatoken": ("gigatoken", "gigatoken"),
    "fastokens": ("fastokens", "fastokens"),
    "toktok": ("toktok", "toktok-rs"),
    "hf1": ("tokenizers", "tokenizers"),
}

# HF tokenizers 1.0 (its "pipeline" engine, a release candidate) cannot share an
# environment with 0.23 (transformers requires tokenizers < 0.24), so it runs from a
# virtual environment of its own that also sees this interpreter's packages (bpe,
# numpy): `run.py --install` makes it. HF1_REQUIREMENT is what goes into it.
HF1_REQUIREMENT = "tokenizers==1.0.0rc3"


def hf1_python() -> Path:
    cache = Path(os.environ.get("BPE_BENCH_CACHE") or Path.home() / ".cache" / "bpe-bench")
    return Path(os.environ.get("BPE_BENCH_HF1_PYTHON") or cache / "hf1-venv" / "bin" / "python")


def interpreter(tool: str | None) -> str:
    """The Python a tool's jobs run in."""
    return str(hf1_python()) if tool == "hf1" else sys.executable


_OTHER_VERSIONS: dict = {}


def _other_version(tool: str) -> str | None:
    """The version of a tool that lives in another interpreter (None: not there)."""
    if tool not in _OTHER_VERSIONS:
        py, (module, dist) = interpreter(tool), TOOLS[tool]
        v = None
        if Path(py).exists():
            p = subprocess.run([py, "-c", f"from importlib import metadata; import {module}; "
                                          f"print(metadata.version({dist!r}))"], capture_output=True, text=True)
            v = p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None
        _OTHER_VERSIONS[tool] = v
    return _OTHER_VERSIONS[tool]

ALIASES = {"tokenizers": "hf", "huggingface": "hf", "spm": "sentencepiece", "bpe_openai": "bpe-openai",
           "toktok-rs": "toktok", "toktok_rs": "toktok"}

NOT_INSTALLED = "not installed (pip install -r benchmarks/requirements.txt)"


# --------------------------------------------------------------------------
# running one job


def median_round(rounds: list):
    """One result from a tool's rounds (one child each): every timed
    measurement (a dict with ``wall_s``) is the median round's, with the
    wall times of all rounds in ``walls``; everything else is the first
    round's."""
    first = rounds[0]
    if not all(isinstance(r, dict) for r in rounds):
        return first
    if all("wall_s" in r for r in rounds):
        mid = dict(sorted(rounds, key=lambda r: r["wall_s"])[(len(rounds) - 1) // 2])
        mid["walls"] = [w for r in rounds for w in r.get("walls", [r["wall_s"]])]
        return mid
    return {k: median_round([r.get(k) for r in rounds]) if isinstance(v, dict) else v for k, v in first.items()}


def run_job(job: dict, timeout: float, env_extra: dict | None = None) -> dict:
    """Runs one measurement in a fresh interpreter and returns its JSON.
    ``env_extra``: variables to set in its environment (None: to unset)."""
    env = dict(os.environ)
    for k, v in (env_extra or {}).items():  # None: unset
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    # The child must import the installed bpe, never the source folder.
    env.pop("PYTHONPATH", None)
    cmd = [interpreter(job.get("tool")), str(WORKER), json.dumps(job)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"timed out after {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    if p.returncode < 0:
        why = f"killed by signal {-p.returncode}" + (" (out of memory?)" if p.returncode == -9 else "")
    else:
        why = f"exit status {p.returncode}"
    tail = (p.stderr or "").strip().splitlines()[-3:]
    return {"status": "error", "error": f"{why}: {' | '.join(tail)}"[:500]}


def load_avg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def free_cores() -> float:
    """How many cores this process can get right now: one thread per core
    hashing for a moment (hashlib releases the GIL), CPU time / wall time.
    Near the core count on an idle machine; well below it when something
    else is running, and then multi-thread numbers mean little."""
    import hashlib
    import resource
    import threading

    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    data = b"\0" * (16 << 20)

    def burn():
        for _ in range(4):
            hashlib.sha256(data).digest()

    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    threads = [threading.Thread(target=burn) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu / (t1 - t0)


def section(title: str, results: dict | None = None, key: str | None = None) -> None:
    la, fc = load_avg(), free_cores()
    if results is not None and key:
        results.setdefault("load_avg", {})[key] = la
        results.setdefault("free_cores", {})[key] = round(fc, 2)
    print(f"\n## {title}\n\nload average before: {la}; cores free now: {fc:.2f} "
          f"(a {os.cpu_count()}-thread probe)", flush=True)
    if fc < 0.8 * (os.cpu_count() or 1):
        print("WARNING: the machine is busy with other work: times are slower than on an idle machine, "
              "and numbers with more than one thread (training, batch encoding) understate what it can do.",
              flush=True)
    print(flush=True)


def installed(tool: str) -> bool:
    if interpreter(tool) != sys.executable:
        return _other_version(tool) is not None
    return importlib.util.find_spec(TOOLS[tool][0]) is not None


def dist_version(tool: str) -> str | None:
    if interpreter(tool) != sys.executable:
        return _other_version(tool)
    try:
        return metadata.version(TOOLS[tool][1])
    except metadata.PackageNotFoundError:
        return None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# --------------------------------------------------------------------------
# tables and charts


def fmt(x, spec=".2f", dash="—"):
    return dash if x is None else format(x, spec)


def ratio(anchor, ours):
    if anchor is None or ours is None or ours == 0:
        return None
    return anchor / ours


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


TOOL_LABEL = {"bpe": "**bpe (us)**", "hf": "HF tokenizers", "hf1": "HF tokenizers 1.0", "sentencepiece": "sentencepiece", "toktok": "toktok-rs"}


def label(tool: str) -> str:
    return TOOL_LABEL.get(tool, tool)


def plain_label(tool: str) -> str:
    """The tool's name for a chart legend or a table column (no markdown)."""
    return "bpe (us)" if tool == "bpe" else label(tool)


def status_text(r: dict) -> str:
    s = r.get("status")
    if s == "not installed":
        return NOT_INSTALLED
    return f"{s}: {r.get('error') or ''}".strip()


# One colour per tool, the same in every panel.
COLORS = {"bpe": "#d62728", "rustbpe": "#1f77b4", "bpeasy": "#9467bd", "hf": "#ff7f0e",
          "sentencepiece": "#2ca02c", "tiktoken": "#1f77b4", "riptoken": "#17becf",
          "tokendagger": "#8c564b", "bpe-openai": "#7f7f7f", "gigatoken": "#e377c2",
          "fastokens": "#bcbd22", "toktok": "#2ca02c"}


def bars(ax, groups, tools, value, spec):
    """Grouped bars: one group per entry of ``groups``, one bar per tool,
    ``value(group index, tool)`` high (None: no bar), labelled with ``spec``."""
    width = 0.8 / max(1, len(tools))
    for ti, t in enumerate(tools):
        xs, ys = [], []
        for gi in range(len(groups)):
            v = value(gi, t)
            if v is not None:
                xs.append(gi + (ti - (len(tools) - 1) / 2) * width)
                ys.append(v)
        drawn = ax.bar(xs, ys, width, label=plain_label(t), color=COLORS.get(t))
        for b, y in zip(drawn, ys):
            ax.annotate(spec.format(y), (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                        fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.margins(y=0.18)
    ax.legend(fontsize=7)
