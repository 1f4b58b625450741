"""Corpus files as people hold them: which reader each file needs, and the
directories and globs that name many of them.

By the name, after a compression suffix (``.gz``, ``.zst``, ``.xz``,
``.bz2``, read as streams by the Rust core) is set aside:

- ``.jsonl``, ``.ndjson``, ``.json``: JSON Lines, one document per record,
  its text in a field (``text_field``, default ``"text"``; ``a.b`` for a
  nested one), read in Rust (``rust/input/records.rs``);
- ``.parquet`` (``.pq``, ``.parq``): a column of strings, read in Rust
  (``rust/input/parquet.rs``); a file called Parquet by ``input_format``
  under another name is read with pyarrow (the ``data`` extra) and handed
  to the core without a copy (``bpe/sources/arrow.py``);
- anything else: UTF-8 text, one document per file.

``input_format`` ("text", "jsonl", "parquet") overrides the name, e.g. for
standard input (``-``), which is text unless told otherwise.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from bpe._util.files import check_readable_file, check_text_file

COMPRESSED = (".gz", ".zst", ".zstd", ".xz", ".bz2")
JSONL = (".jsonl", ".ndjson", ".json")
PARQUET = (".parquet", ".pq", ".parq")
FORMATS = ("auto", "text", "jsonl", "parquet")


@dataclass(frozen=True)
class SourceOptions:
    """How to read corpus files: the JSON field, the policy for bad records,
    and the format when the name does not say it."""

    text_field: str = "text"
    skip_bad: bool = False
    input_format: str = "auto"

    def __post_init__(self):
        if not isinstance(self.text_field, str) or not self.text_field or "" in self.text_field.split("."):
            raise ValueError(f"text_field must be a field name such as 'text' or 'meta.body', not {self.text_field!r}")
        if not isinstance(self.skip_bad, bool):
            raise TypeError(f"skip_bad must be True or False, not {self.skip_bad!r}")
        if self.input_format not in FORMATS:
            raise ValueError(f"input_format must be one of {', '.join(FORMATS)}, not {self.input_format!r}")

    @property
    def field_path(self) -> list[str]:
        return self.text_field.split(".")


def compressed(path: str) -> bool:
    return path.lower().endswith(COMPRESSED)


def kind(path: str, options: SourceOptions) -> str:
    """"text", "jsonl" or "parquet": how ``path`` is read."""
    if options.input_format != "auto":
        return options.input_format
    name = path.lower()
    for suffix in COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.endswith(JSONL):
        return "jsonl"
    if name.endswith(PARQUET):
        return "parquet"
    return "text"


def expand(paths) -> list[str]:
    """Paths as given, with each directory replaced by the files under it
    (recursively, sorted, hidden ones left out) and each glob pattern that
    names no file by its matches (``**`` recurses). ``-`` stays."""
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if p != "-" and os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, f) for f in sorted(files) if not f.startswith(".")]
            if not found:
                raise ValueError(f"{p} is a directory with no files in it")
            out += found
        elif p != "-" and not os.path.exists(p) and glob.has_magic(p):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise FileNotFoundError(f"{p}: no file matches this pattern")
            out += [m for m in matches if os.path.isfile(m)]
        else:
            out.append(p)
    return out


def check(path: str, options: SourceOptions) -> str:
    """The checks made before reading ``path``: a readable regular file, and
    for plain text not a binary one (compressed data is checked as it is
    decompressed: bad bytes there are an error naming the offset)."""
    if path == "-":
        return path
    if kind(path, options) == "text" and not compressed(path):
        return check_text_file(path)
    return check_readable_file(path)


def skipped_message(skipped: dict[str, int]) -> str | None:
    """"skipped 3 bad records in 2 files (a.jsonl: 2, b.jsonl: 1)", or None."""
    bad = {p: n for p, n in skipped.items() if n}
    if not bad:
        return None
    total = sum(bad.values())
    shown = ", ".join(f"{p}: {n}" for p, n in list(bad.items())[:5]) + (", ..." if len(bad) > 5 else "")
    return (f"skipped {total:,} bad record{'s' if total != 1 else ''} in {len(bad)} file{'s' if len(bad) != 1 else ''} "
            f"({shown})")
