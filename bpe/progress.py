"""The progress bar on stderr, the same for every command: training draws it
from Rust, and Python code that works in blocks (encoding a dataset, reading
files) drives it with this class.

    with Progress("encoding", total=n_bytes) as bar:
        for done in blocks():
            bar.update(done)              # bytes done so far (not an increment)
        bar.update(n_bytes, tokens=n)     # an extra count, after the line

draws on a terminal, then leaves:

    encoding [========>           ] 52.4 MB/1.20 GB, 104 MB/s, 3s, eta 11s
    encoding [====================] 1.20 GB/1.20 GB, 104 MB/s, in 11.5s, 300,124,416 tokens

The rate appears once a second has passed, the ETA once the rate is known
and 3% is done; the rules are in ``rust/progress.rs``, the bar in
``rust/py/progress.rs``.
"""

from __future__ import annotations

import sys
import time

from bpe import _core


class Progress:
    """A bar for ``what``, out of ``total`` if known, counting ``unit``:
    "bytes", or the plural noun of the things counted ("items", "files").

    Drawn only when stderr is a terminal, and never with ``show=False``.
    ``update`` is cheap (the bar redraws at most 20 times a second); the
    last line stays, with the time taken, once the ``with`` block ends, also
    by an exception.
    """

    def __init__(self, what: str, total: int | None = None, unit: str = "bytes", show: bool | None = None):
        self._bar = _core.Progress(what, total, unit, show)

    def update(self, done: int, tokens: int | None = None) -> None:
        """``done`` so far; ``tokens``, if given, is shown after the line."""
        self._bar.update(done, tokens)

    def finish(self) -> None:
        """Stops the bar where it is and draws its last line (once)."""
        self._bar.finish()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.finish()


class ClusterProgress:
    """``counting on Ray: 3/12 shards, 190 MB/760 MB, 41.2 MB/s`` on stderr,
    redrawn in place (at most 10 times a second) when shown: the progress of
    work done in shards (``bpe/distributed/ray.py``), whose tasks report only
    when they finish, so the bar above (bytes as they stream) does not fit."""

    def __init__(self, what: str, shards: int, total_bytes: int, show: bool):
        self.what, self.shards, self.total, self.show = what, shards, total_bytes, show
        self.start = self.last = time.monotonic()
        self.done = self.bytes = 0

    def update(self, shards_done: int, bytes_done: int) -> None:
        self.done, self.bytes = shards_done, bytes_done
        now = time.monotonic()
        if self.show and (now - self.last >= 0.1 or shards_done == self.shards):
            self.last = now
            sys.stderr.write("\r" + self.line(now) + "\x1b[K")
            sys.stderr.flush()

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        return (f"{self.what}: {self.done}/{self.shards} shards, {_size(self.bytes)}/{_size(self.total)}, "
                f"{_size(self.bytes / elapsed)}/s, {elapsed:.1f}s")

    def finish(self) -> None:
        if self.show:
            sys.stderr.write("\r" + self.line(time.monotonic()) + "\x1b[K\n")
            sys.stderr.flush()


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
