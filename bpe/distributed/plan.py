"""Cutting a corpus into shards: units of work that can be counted or
encoded apart (on other cores or other machines) and whose results add up to
those of the whole corpus, exactly.

A shard is a whole input file, or a byte range of a large plain-text file.
Ranges end at *safe cut points* (``rust/split/pretokenize.rs``, ``is_safe_cut``):
just after a newline that follows a character that is not white space, and
before a letter or digit. For the built-in split patterns no chunk crosses
such a point (proven there), so the chunks, and hence the counts and the ids,
of the pieces are those of the whole file. A custom pattern has no such
proof: its files are never cut.

The cuts taken here are a subset of the core's: the character before the
newline must be printable ASCII and the one after it an ASCII letter or digit
(so that Python's and Rust's ideas of "white space" and "alphanumeric",
which differ on some Unicode characters, never matter). A file with no such
point near a target is simply cut less often: its shards grow, nothing else.
Finding a cut reads a few KB near each target; the bytes themselves are read
by the Rust core.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from bpe.sources import paths as sources
from bpe._util.patterns import pattern_cuttable
from bpe.sources.paths import SourceOptions

#: Default shard size for plain-text files: big enough that per-task
#: overhead (a Ray task, a count table) is small, small enough to balance.
SHARD_BYTES = 64 << 20

#: How far past a target a cut is looked for before giving up on it.
_SEARCH_BYTES = 4 << 20
_WINDOW = 64 << 10
# A printable ASCII character, a newline, an ASCII letter or digit: the
# cut is just after the newline (match start + 2).
_CUT = re.compile(rb"[\x21-\x7e]\n[A-Za-z0-9]")


@dataclass(frozen=True)
class Shard:
    """One unit of work: ``path`` (absolute), bytes ``start`` to ``end``
    (``None``: to the end; a cut file's pieces have both), read as ``kind``
    ("text", "jsonl", "parquet"). ``doc_start``: the piece begins a
    document (False only for the second and later pieces of a cut file)."""

    index: int
    path: str
    start: int
    end: int | None
    kind: str
    doc_start: bool
    size: int  # bytes on disk this shard reads (for progress and balance)

    def describe(self) -> str:
        """The file, with the range if it is a piece: for messages."""
        if self.end is None:
            return self.path
        return f"{self.path} (bytes {self.start:,} to {self.end:,})"

    def key(self) -> dict:
        """What identifies the shard's input (recorded with its output)."""
        return {"source": self.path, "start": self.start, "end": self.end, "kind": self.kind}


def cuttable(pattern: str) -> bool:
    """Whether files may be cut for ``pattern``: the built-in regexes, and
    sequences of them with a digit rule (the Rust core decides: it proves
    its safe cuts for those, ``rust/split/steps/mod.rs``)."""
    return pattern_cuttable(pattern)


def check_shard_bytes(shard_bytes) -> int:
    if isinstance(shard_bytes, bool) or not isinstance(shard_bytes, int):
        raise TypeError(f"shard_size must be an int of bytes, not {type(shard_bytes).__name__}")
    if shard_bytes < 1:
        raise ValueError(f"shard_size must be at least 1 byte, got {shard_bytes}")
    return shard_bytes


def input_paths(source) -> list[str]:
    """The files of ``source``: a path (``str`` or ``os.PathLike``: a file, a
    directory or a glob) or a list of them, expanded as the CLI does."""
    if isinstance(source, (str, os.PathLike)):
        items = [source]
    elif isinstance(source, (list, tuple)):
        items = list(source)
    else:
        raise TypeError(
            f"source must be a path (a file, directory or glob) or a list of them, not {type(source).__name__}; "
            f"a cluster reads files, so texts in memory go to bpe.count or Tokenizer.train"
        )
    for i, item in enumerate(items):
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"source item {i} is a {type(item).__name__}; expected a path")
        if os.fspath(item) == "-":
            raise ValueError("standard input (-) cannot be sharded; save it to a file first")
    paths = sources.expand(items)
    if not paths:
        raise ValueError("no input files")
    return paths


def plan(source, options: SourceOptions, pattern: str, shard_bytes: int = SHARD_BYTES) -> list[Shard]:
    """The shards of ``source`` in corpus order: each file checked up front
    (a missing or binary file fails here, before any work), plain-text files
    larger than ``shard_bytes`` cut at safe points when ``pattern`` allows."""
    shard_bytes = check_shard_bytes(shard_bytes)
    shards: list[Shard] = []
    for path in input_paths(source):
        path = os.path.abspath(sources.check(path, options))
        size = os.path.getsize(path)
        kind = sources.kind(path, options)
        if kind == "text" and not sources.compressed(path) and cuttable(pattern) and size > shard_bytes:
            cuts = [0, *safe_cuts(path, size, shard_bytes), size]
            for k, (a, b) in enumerate(zip(cuts, cuts[1:])):
                shards.append(Shard(len(shards), path, a, b, kind, k == 0, b - a))
        else:
            shards.append(Shard(len(shards), path, 0, None, kind, True, size))
    return shards


def safe_cuts(path: str, size: int, shard_bytes: int) -> list[int]:
    """Safe cut points of the file near every multiple of ``shard_bytes``,
    increasing, each strictly inside the file."""
    cuts: list[int] = []
    with open(path, "rb") as f:
        target = shard_bytes
        while target < size:
            p = _next_cut(f, max(target, (cuts[-1] + 1) if cuts else 1), size)
            if p is not None and 0 < p < size:
                cuts.append(p)
                target = max(target, p) + shard_bytes
            else:
                target += shard_bytes
    return cuts


def _next_cut(f, at: int, size: int) -> int | None:
    """The first cut at or after ``at`` (within ``_SEARCH_BYTES``), or None."""
    pos = max(0, at - 2)  # the two bytes before the cut must be in the window
    limit = min(size, at + _SEARCH_BYTES)
    while pos < limit:
        f.seek(pos)
        window = f.read(_WINDOW + 2)
        if len(window) < 3:
            return None
        m = _CUT.search(window)
        while m and pos + m.start() + 2 < at:
            m = _CUT.search(window, m.start() + 1)
        if m:
            return pos + m.start() + 2
        pos += _WINDOW
    return None
