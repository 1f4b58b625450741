"""The one progress bar (bpe/progress.py; drawn by rust/py/progress.rs, its
words by rust/progress.rs): what it draws on a terminal, and that it draws
nothing anywhere else.

Each test runs a child Python with stderr on a pseudo-terminal, reads every
byte it draws and cuts them into the lines a terminal would have shown. The
promises checked on every line: one shape for every bar (training's, encoding's,
Python's own), the rate only from 1 s on, the ETA only once the rate is known
and 3% is done (and never for merging, which speeds up), rates to at most 3
significant figures. The rules' edges are
unit-tested in rust/progress.rs, without a terminal.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import textwrap
import time

from conftest import CORPORA

WIDTH = 120  # columns of the pseudo-terminal

COUNT = r"\d{1,3}(?:,\d{3})*"
BYTES = r"\d+(?:\.\d+)?\ [kMGTP]?B"  # (the pattern is verbose: spaces escaped)
CLOCK = r"\d+s|\d+m\d\ds|\d+h\d\dm"
LINE = re.compile(
    rf"""\ *(?P<what>[a-z]+)\ (?:\[[=>\ ]{{20}}\]|\S|\ )\         # label, then a bar or a spinner
    (?P<done>{BYTES}|{COUNT})(?:/(?P<total>{BYTES}|{COUNT}))?(?:\ (?P<noun>[a-z]+))?
    (?:,\ (?P<rate>(?P<figures>\d+(?:\.\d+)?)(?:\ [kMGTP]?B|[kMGTP]?)/s))?
    ,\ (?:(?P<elapsed>{CLOCK})(?:,\ eta\ (?P<eta>{CLOCK}))?|in\ (?P<took>\d+\.\d+s|{CLOCK}))
    (?:,\ (?P<tokens>{COUNT})\ tokens)?""",
    re.X,
)


def run_child(code: str, *, tty: bool = True) -> tuple[list[str], str]:
    """Runs ``code`` in a child Python; returns the lines drawn on its stderr
    (a pseudo-terminal if ``tty``, else a pipe) and that stderr as text."""
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    env = {**os.environ, "TERM": "xterm"}
    if not tty:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        return [line for line in p.stderr.splitlines() if line.strip()], p.stderr
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, WIDTH, 0, 0))
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)  # the child's copy is the only one: reading ends when it exits
    raw, deadline = b"", time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                raw += chunk
            elif p.poll() is not None and not select.select([master], [], [], 0)[0]:
                break
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
        p.wait()
    text = raw.decode("utf-8", "replace")
    assert p.returncode == 0, text
    return screen_lines(text), text


def screen_lines(text: str) -> list[str]:
    """Every line the terminal showed, each time it was drawn. A bar redraws
    its line after "\\r", and pads its last line to the terminal's width so
    that what comes next wraps to a line of its own: cut there too."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # cursor moves, line clears
    lines = []
    for piece in re.split(r"[\r\n]", text):
        for start in range(0, len(piece), WIDTH):
            if line := piece[start:start + WIDTH].rstrip():
                lines.append(line)
    return lines


def number(s: str) -> float:
    """ "52.4 MB" -> 52.4e6, "1,234" -> 1234."""
    if s.endswith("B"):
        figures, unit = s.split()
        return float(figures) * 1000 ** "BkMGTP".index(unit[0] if len(unit) == 2 else "B")
    return int(s.replace(",", ""))


def seconds(clock: str) -> int:
    """ "1m05s" -> 65 (as drawn: whole seconds, rounded down)."""
    h, m, s = (re.search(rf"(\d+){u}", clock) for u in "hms")
    return sum(int(x.group(1)) * k for x, k in ((h, 3600), (m, 60), (s, 1)) if x)


def parse(lines: list[str]) -> list[re.Match]:
    """Each line as a match of LINE, checked against the promises."""
    parsed = []
    for line in lines:
        m = LINE.fullmatch(line)
        assert m, f"not the bar's shape: {line!r}"
        if m["rate"]:
            significant = m["figures"].replace(".", "").lstrip("0")
            assert len(significant) <= 3, f"rate not rounded: {line!r}"
            assert m["took"] or seconds(m["elapsed"]) >= 1, f"a rate in the first second: {line!r}"
        if m["eta"]:
            assert m["rate"], f"an ETA without a rate: {line!r}"
            assert seconds(m["elapsed"]) >= 1, f"an ETA in the first second: {line!r}"
            # 3% of the total (the drawn numbers are rounded to 3 figures: a little slack).
            assert number(m["done"]) >= 0.029 * number(m["total"]), f"an ETA before 3% was done: {line!r}"
        parsed.append(m)
    return parsed


def bars(parsed: list[re.Match]) -> dict[str, list[re.Match]]:
    out: dict[str, list[re.Match]] = {}
    for m in parsed:
        out.setdefault(m["what"], []).append(m)
    return out


def fraction(m: re.Match) -> float:
    return number(m["done"]) / number(m["total"])


def test_python_bar_keeps_its_promises():
    lines, text = run_child("""
        import time
        from bpe.progress import Progress

        # Half done within the first second: no rate, no ETA yet.
        with Progress("short", total=100_000_000) as bar:
            for i in range(1, 6):
                time.sleep(0.1)
                bar.update(i * 10_000_000)

        # Past a second but under 3% done: a rate, no ETA; then an ETA.
        with Progress("slow", total=1000, unit="items") as bar:
            for i in range(1, 16):
                time.sleep(0.1)
                bar.update(i)
            for i in range(1, 11):
                time.sleep(0.1)
                bar.update(100 * i)

        # No total: never an ETA; an extra count after the line.
        with Progress("open", unit="files") as bar:
            for i in range(1, 13):
                time.sleep(0.1)
                bar.update(i * 1000, tokens=i * 12345)
    """)
    by = bars(parse(lines))
    assert set(by) == {"short", "slow", "open"}, text

    short = by["short"]
    # Half done, yet no ETA in the first second (parse checked every line).
    assert any(m["elapsed"] == "0s" and fraction(m) >= 0.03 and not m["eta"] for m in short)
    assert short[-1]["took"] and short[-1]["rate"] and short[-1]["done"] == "50.0 MB", short[-1][0]

    slow = by["slow"]
    # A rate after a second, but no ETA under 3% done; then one.
    assert any(m["elapsed"] and seconds(m["elapsed"]) >= 1 and fraction(m) < 0.03 and m["rate"] for m in slow)
    assert any(m["eta"] for m in slow), "no ETA once the rate was known and 3% done"
    assert slow[-1]["took"] and slow[-1]["done"] == "1,000" and slow[-1]["noun"] == "items"

    opened = by["open"]
    assert not any(m["total"] or m["eta"] for m in opened)
    assert opened[-1]["took"] and opened[-1]["tokens"] == "148,140" and opened[-1]["noun"] == "files"


def test_training_and_encoding_draw_the_same_bar(tmp_path):
    # A real run: count a file, learn merges, encode a dataset with the result.
    lines, text = run_child(f"""
        from pathlib import Path
        from bpe import Tokenizer
        from bpe.data.dataset import write_dataset

        tok = Tokenizer.train(Path({str(CORPORA / "tinyshakespeare.txt")!r}), vocab_size=1000, progress=True)
        tok.save({str(tmp_path / "t.bpe")!r})
        write_dataset([{str(CORPORA / "tinyshakespeare.txt")!r}], {str(tmp_path / "t.bpe")!r},
                      {str(tmp_path / "ds")!r}, progress=True)
    """)
    by = bars(parse(lines))  # the same LINE, the same rules as the Python bar's
    assert set(by) == {"counting", "merging", "encoding"}, text
    for what, last in (("counting", "1.12 MB"), ("merging", "743"), ("encoding", "1.12 MB")):
        end = by[what][-1]
        assert end["took"] and end["rate"] and end["done"] == last == end["total"], end[0]
    assert by["merging"][-1]["noun"] == "merges"
    assert not any(m["eta"] for m in by["merging"]), "merging speeds up: no ETA"
    assert by["encoding"][-1]["tokens"], "the dataset's token count"


def test_nothing_drawn_off_a_terminal_or_when_not_shown():
    corpus = str(CORPORA / "tinyshakespeare.txt")
    child = f"""
        from pathlib import Path
        from bpe import Tokenizer
        from bpe.progress import Progress

        with Progress("quiet", total=10, unit="items", show=SHOW) as bar:
            bar.update(5, tokens=3)
        Tokenizer.train(Path({corpus!r}), vocab_size=300, progress=SHOW)
    """
    # stderr a pipe: nothing by default, nor when asked to show.
    for show in ("None", "True"):
        lines, _ = run_child(child.replace("SHOW", show), tty=False)
        assert lines == [], (show, lines)
    # A terminal, but show=False.
    lines, text = run_child(child.replace("SHOW", "False"))
    assert text == "", repr(text)
