"""What ``bpe gpt compare`` shows: the training bar on stderr, the table
(plain or Markdown), and the plot of bits per byte against training bytes.

The bar is drawn here, not by ``bpe.progress.Progress``: that bar's one
extra field is a count of tokens, and a training run's line also needs its
step and current loss. It looks the same (``what [====>   ] done/total``)
and is drawn only when stderr is a terminal.
"""

from __future__ import annotations

import math
import os
import sys
import time

__all__ = ["COLUMNS", "TrainingBar", "format_markdown", "format_table", "human_bytes", "plot", "require_matplotlib"]


def human_bytes(n: float) -> str:
    """``1.20 MB``: powers of 1000, as the project's bars write sizes."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} TB"


def _seconds(s: float) -> str:
    return f"{s:.0f}s" if s < 60 else f"{int(s // 60)}m{int(s % 60):02d}s"


class TrainingBar:
    """``bpe-4k [========>     ] step 120/500, 1.20 MB/2.00 MB, loss 2.345, 12s, eta 30s``
    on stderr, redrawn in place at most 10 times a second, when ``show``
    (default: stderr is a terminal). Call :meth:`due` before paying for the
    loss (reading it waits for the GPU), then :meth:`update`."""

    WIDTH = 20

    def __init__(self, what: str, steps: int, total_bytes: int, show: bool | None = None):
        self.what, self.steps, self.total = what, steps, total_bytes
        self.show = sys.stderr.isatty() if show is None else show
        self.start = time.monotonic()
        self.last = 0.0
        self.state = (0, 0, float("nan"))
        self.drawn = False

    def due(self) -> bool:
        return self.show and time.monotonic() - self.last >= 0.1

    def update(self, step: int, bytes_seen: int, loss: float) -> None:
        self.state = (step, bytes_seen, loss)
        if self.show:
            self.last = time.monotonic()
            sys.stderr.write("\r" + self.line(self.last) + "\x1b[K")
            sys.stderr.flush()
            self.drawn = True

    def line(self, now: float) -> str:
        step, seen, loss = self.state
        frac = min(1.0, step / self.steps) if self.steps else 1.0
        filled = int(frac * self.WIDTH)
        bar = "=" * filled + (">" if filled < self.WIDTH else "") + " " * (self.WIDTH - filled - 1)
        elapsed = now - self.start
        eta = f", eta {_seconds(elapsed * (1 - frac) / frac)}" if 0.03 <= frac < 1 else ""
        return (f"{self.what} [{bar[:self.WIDTH]}] step {step}/{self.steps}, {human_bytes(seen)}/"
                f"{human_bytes(self.total)}, loss {loss:.3f}, {_seconds(elapsed)}{eta}")

    def finish(self) -> None:
        """Leaves the last line (once)."""
        if self.show and self.drawn:
            sys.stderr.write("\r" + self.line(time.monotonic()) + "\x1b[K\n")
            sys.stderr.flush()
            self.drawn = False


# -- the table ------------------------------------------------------------------------

COLUMNS = [  # (key, heading, format)
    ("vocab", "vocab", "{:,}"),
    ("bits_per_byte", "bits/byte", "{:.4f}"),
    ("bits_per_byte_std", "± (std)", "{:.4f}"),
    ("bytes_per_token", "bytes/tok", "{:.3f}"),
    ("tokens_per_word", "tok/word", "{:.3f}"),
    ("renyi_efficiency", "Rényi eff", "{:.3f}"),
    ("non_embedding_params", "non-emb params", "{:,}"),
    ("embedding_params", "emb params", "{:,}"),
    ("steps", "steps", "{:,}"),
    ("train_tokens", "train tokens", "{:,}"),
    ("train_bytes", "train bytes", "{:,}"),
    ("flops", "FLOPs", "{:.3g}"),
    ("train_seconds", "train s", "{:.0f}"),
]


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = fmt.format(value)
    if key == "bits_per_byte" and not row.get("complete", True):
        text += "*"
    return text


def _grid(rows: list[dict]) -> list[list[str]]:
    head = ["tokenizer", *(h for _, h, _ in COLUMNS)]
    return [head] + [[r["tokenizer"], *(_cell(r, k, f) for k, _, f in COLUMNS)] for r in rows]


def _footnote(rows: list[dict]) -> str:
    if all(r.get("complete", True) for r in rows):
        return ""
    return "\n* interrupted: the last evaluation before Ctrl-C, after the training bytes shown"


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned text table (numbers right-aligned)."""
    grid = _grid(rows)
    widths = [max(len(line[i]) for line in grid) for i in range(len(grid[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
             for line in grid]
    return "\n".join(lines) + _footnote(rows)


def format_markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    grid = _grid(rows)
    out = ["| " + " | ".join(grid[0]) + " |", "|---|" + "---:|" * (len(grid[0]) - 1)]
    out += ["| " + " | ".join(line) + " |" for line in grid[1:]]
    return "\n".join(out) + _footnote(rows)


# -- the plot -------------------------------------------------------------------------


def require_matplotlib():
    """``matplotlib.pyplot`` (drawing to files, no display), or ImportError
    saying how to install it. ``bpe gpt compare --plot`` calls it before
    training, so a missing extra fails in a second, not after the runs."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the plot needs matplotlib: pip install 'bpe[plot]'") from None
    return plt


def plot(result: dict, path: str | os.PathLike, *, force: bool = False) -> None:
    """Bits per byte on the held-out text against training bytes seen, a
    curve per tokenizer (the mean over seeds; with several seeds, their
    range shaded), written atomically to ``path`` (PNG, SVG, PDF: by its
    extension)."""
    plt = require_matplotlib()
    from bpe._util.files import atomic_write

    s = result["settings"]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for row in result["rows"]:
        curves = [r["curve"] for r in result["runs"] if r["tokenizer"] == row["tokenizer"] and r["curve"]]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        x = [sum(c[i]["bytes"] for c in curves) / len(curves) / 1e6 for i in range(n)]
        ys = [[c[i]["bits_per_byte"] for c in curves] for i in range(n)]
        mean = [sum(v) / len(v) for v in ys]
        line, = ax.plot(x, mean, marker="o", markersize=3, label=f"{row['tokenizer']} ({row['vocab']:,})")
        if len(curves) > 1:
            ax.fill_between(x, [min(v) for v in ys], [max(v) for v in ys], color=line.get_color(), alpha=0.2)
    ax.set_xlabel("training bytes seen (MB)")
    ax.set_ylabel("held-out bits per byte (lower is better)")
    ax.set_title(f"{s['n_layer']} layers × {s['n_embd']} wide, context {s['block_size']} tokens, "
                 f"{len(s['seeds'])} seed{'s' if len(s['seeds']) > 1 else ''}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=ext, dpi=100), force=force)
    finally:
        plt.close(fig)
