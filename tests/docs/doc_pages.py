"""The code examples of README.md and of the documentation pages, as the tests
run them (tests/docs/test_examples.py).

A page's ```python and ```bash blocks run in order, in one fresh Python
interpreter per page (later blocks use the names and files of earlier ones, as
a reader would), in a scratch directory that sees the shipped ``corpora/``. A
bash block runs as ``bash -euo pipefail`` in that directory at its place in
the page. A block whose preceding non-blank line is ``<!-- not run: REASON -->``
is skipped; the reason says why it cannot run in a test and where the same
thing is tested instead. Other fenced blocks are not code to run (``text``:
output and formats; ``json``: a file's content) and must name their language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT

RUN = ("python", "bash")
SHOWN = ("text", "json", "toml", "yaml")
SKIP = "<!-- not run:"
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass
class Block:
    page: str     # relative to the repository
    line: int     # of the first line of code (1-based)
    lang: str
    code: str
    skip: str | None  # the not-run marker, when there is one


def pages() -> list[Path]:
    """README.md and every page of the site but the engineering notes (docs/dev/,
    records of how measurements were taken, whose commands need the project's
    large corpora and profiling tools)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "dev" not in p.relative_to(ROOT / "docs").parts[:1])
    return [ROOT / "README.md", *docs]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            indent, lang = m.groups()
            j = i + 1
            while not re.match(rf"^{indent}```\s*$", lines[j]):
                j += 1
            previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            code = "\n".join(line[len(indent):] for line in lines[i + 1:j])
            out.append(Block(str(path.relative_to(ROOT)), i + 2, lang, code,
                             previous if previous.startswith(SKIP) else None))
            i = j
        i += 1
    return out


def script(page_blocks: list[Block]) -> str:
    """A Python program that runs the blocks that run, in order; each is compiled
    with its page's name and line, so that a failure points at the page."""
    parts = [
        "import subprocess as _sp",
        "def _bash(code, where):",
        "    r = _sp.run(['bash', '-euo', 'pipefail', '-c', code], capture_output=True, text=True, timeout=600)",
        "    if r.returncode:",
        "        raise RuntimeError(f'{where}: exit status {r.returncode}\\n{r.stdout[-2000:]}\\n{r.stderr[-3000:]}')",
    ]
    for b in page_blocks:
        if b.skip or b.lang not in RUN:
            continue
        where = f"{b.page} (block at line {b.line})"
        if b.lang == "python":
            parts.append(f"exec(compile({b.code!r}, {where!r}, 'exec'))")
        else:
            parts.append(f"_bash({b.code!r}, {where!r})")
    return "\n".join(parts)
