"""Encoding and decoding as streams, for the command line: from files or
standard input (``-``) to an open file descriptor (stdout, or the temporary
file of an atomic ``-o FILE``), in bounded memory.

The Rust core reads, cuts, encodes and writes (``rust/py/stream.rs``); this
module chooses the formats and handles ``.npy``'s header, whose length field
is only known at the end: it is written first with room for any count, then
rewritten in place (so ``.npy`` output needs a file, not a pipe).

Formats of encoded ids:
  ``ids``    one line per document (a text file, or a record of JSON Lines
             or Parquet), ids separated by spaces
  ``json``   one JSON array per document, a line each (JSON Lines)
  ``numpy``  one ``.npy`` array of all ids (uint16, or uint32 past 65,536
             tokens), ``<|endoftext|>`` between documents when the tokenizer has it
"""

from __future__ import annotations

import ast
import os
import struct
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

from bpe import _core

from bpe.sources import paths as sources
from bpe.sources.paths import SourceOptions
from bpe._util.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer

TEXT_FORMATS = ("ids", "json")
FORMATS = (*TEXT_FORMATS, "numpy")

#: The dtypes a ``.bin`` or ``.npy`` of ids may have, as (width, signed).
DTYPES = {"uint16": (2, False), "uint32": (4, False), "int32": (4, True), "int64": (8, True), "uint64": (8, False)}
_NPY_DESCR = {"<u2": "uint16", "<u4": "uint32", "<i4": "int32", "<i8": "int64", "<u8": "uint64"}


def _width(tok: Tokenizer) -> int:
    return 2 if tok.n_vocab - 1 <= 0xFFFF else 4


@dataclass
class Encoded:
    """What an encoding stream did, per input file: its ids (a separator
    counts to the file before it), its documents (1 for a text file, one per
    record otherwise), and the bad records skipped (with ``skip_bad``)."""

    ids: list[int] = field(default_factory=list)
    documents: list[int] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def encode_to_fd(
    tok: Tokenizer,
    paths: Sequence[str],
    fd: int,
    fmt: str,
    *,
    options: SourceOptions | None = None,
    allowed_special: Sequence[str] = (),
    disallowed_special: Sequence[str] = (),
    num_threads: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Encoded:
    """Encodes each of ``paths`` (``-``: stdin; text, JSON Lines or Parquet,
    compressed or not: ``bpe/sources/paths.py``) and writes the ids to ``fd`` in
    ``fmt`` (see the module's docstring, and ``"count"``: nothing written)."""
    if fmt not in (*FORMATS, "count"):
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    options = options or SourceOptions()
    width = _width(tok)
    binary = fmt == "numpy"
    core_fmt = "binary" if binary else fmt
    separator = tok.special_tokens.get(ENDOFTEXT) if binary else None
    if binary:
        header_at = os.lseek(fd, 0, os.SEEK_CUR)
        os.write(fd, npy_header(width, 0))
    specials = (list(allowed_special), list(disallowed_special))
    done = Encoded()
    base = 0  # bytes of input before the current group, for progress
    for kind, group in _groups(paths, options):
        if binary and separator is not None and sum(done.documents):
            # The core puts separators between the documents of one call;
            # this one goes between the last call's and this one's.
            os.write(fd, separator.to_bytes(width, "little"))
            done.ids[-1] += 1
        at = (lambda n, base=base: progress(base + n)) if progress else None
        if kind == "text":
            ids = _core.encode_to_fd(tok._core, group, fd, core_fmt, *specials, separator, num_threads, width, at)
            done.ids += ids
            done.documents += [1] * len(group)
        elif kind == "records":
            per_file, skipped = _core.encode_records_to_fd(
                tok._core, group, options.field_path, options.skip_bad, fd, core_fmt, *specials, separator,
                num_threads, width, at)
            done.documents += [r for r, _ in per_file]
            done.ids += [n for _, n in per_file]
            done.skipped.update(zip(group, skipped))
        else:
            from bpe.sources import arrow as arrow_sources

            for path in group:  # one Parquet file a group: see _groups
                with warnings.catch_warnings():  # reported with the others' by the caller
                    warnings.simplefilter("ignore", arrow_sources.SkippedRecordsWarning)
                    records, ids, skipped = arrow_sources.encode_arrow_to_fd(
                        tok, path, fd, core_fmt, column=options.text_field, name=path, skip_bad=options.skip_bad,
                        allowed_special=specials[0], disallowed_special=specials[1], separator=separator,
                        num_threads=num_threads, width=width)
                done.documents.append(records)
                done.ids.append(ids)
                done.skipped[path] = skipped
        base += sum(0 if p == "-" else os.path.getsize(p) for p in group)
    if binary:
        end = os.lseek(fd, 0, os.SEEK_CUR)
        os.lseek(fd, header_at, os.SEEK_SET)
        os.write(fd, npy_header(width, sum(done.ids)))
        os.lseek(fd, end, os.SEEK_SET)
    return done


def _groups(paths: Sequence[str], options: SourceOptions):
    """Runs of consecutive paths read the same way, in order: "text",
    "records" (JSON Lines, and Parquet files named so: both read in Rust,
    rust/input/records.rs and parquet.rs) or "parquet" (pyarrow)."""
    runs: list[tuple[str, list[str]]] = []
    for p in paths:
        k = sources.kind(p, options)
        if k == "jsonl" or k == "parquet" and p.lower().endswith(sources.PARQUET):
            k = "records"
        # Parquet files one by one: the separator between two of them is
        # written here, between calls, as between any two groups.
        if runs and runs[-1][0] == k and k != "parquet":
            runs[-1][1].append(p)
        else:
            runs.append((k, [p]))
    return runs


def count_tokens(
    tok: Tokenizer, paths: Sequence[str], *, options: SourceOptions | None = None, allowed_special=(),
    disallowed_special=(), num_threads: int = 0, progress: Callable[[int], None] | None = None,
) -> Encoded:
    """The number of ids (and documents) of each of ``paths``, nothing kept
    but the counts."""
    return encode_to_fd(tok, paths, -1, "count", options=options, allowed_special=allowed_special,
                        disallowed_special=disallowed_special, num_threads=num_threads, progress=progress)


def decode_to_fd(tok: Tokenizer, path: str, fd: int, *, dtype: str | None, errors: str) -> int:
    """Decodes the ids in ``path`` (``-``: stdin) and writes the text (or,
    with ``errors="bytes"``, the raw bytes) to ``fd``; returns the number of
    ids. ``dtype``: the ids are binary of that dtype (``.bin``); ``"npy"``:
    a ``.npy`` file; ``None``: ids as text."""
    skip, ids, width, signed = 0, "text", 4, False
    if dtype == "npy":
        dtype, skip = read_npy_header(path)
    if dtype is not None:
        if dtype not in DTYPES:
            raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        ids, (width, signed) = "binary", DTYPES[dtype]
    return _core.decode_to_fd(tok._core, path, skip, ids, width, signed, errors, fd)


# -- .npy -----------------------------------------------------------------------
#
# The format (numpy's NEP 1): magic "\x93NUMPY", version 1.0, a little-endian
# u16 header length, then a Python dict literal padded with spaces to a
# multiple of 64 bytes and ended by "\n"; the data follows.

_MAGIC = b"\x93NUMPY"
#: Room for any count: the header is padded to this size whatever the count,
#: so that the final one overwrites the first exactly.
_NPY_HEADER_BYTES = 128


def npy_header(width: int, count: int) -> bytes:
    descr = {2: "<u2", 4: "<u4"}[width]
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({count},), }}"
    pad = _NPY_HEADER_BYTES - len(_MAGIC) - 4 - len(text) - 1
    return _MAGIC + b"\x01\x00" + struct.pack("<H", _NPY_HEADER_BYTES - 10) + text.encode("ascii") + b" " * pad + b"\n"


def read_npy_header(path: str) -> tuple[str, int]:
    """The dtype of the 1-D ``.npy`` array in ``path`` and where its data
    starts. From stdin the header is read unbuffered, so the core reads on
    from the first byte of data (and the returned offset is then 0)."""
    fd = 0 if path == "-" else os.open(path, os.O_RDONLY)
    try:
        start = _read_exactly(fd, 10, path)
        if start[:6] != _MAGIC:
            raise ValueError(f"{_name(path)} is not a .npy file (it does not start with numpy's magic bytes)")
        major = start[6]
        size_bytes = 2 if major == 1 else 4
        more = _read_exactly(fd, size_bytes - 2, path) if size_bytes > 2 else b""
        (length,) = struct.unpack("<H" if size_bytes == 2 else "<I", start[8:10] + more)
        header = _read_exactly(fd, length, path).decode("latin-1")
    finally:
        if fd != 0:
            os.close(fd)
    try:
        meta = ast.literal_eval(header.strip())
        descr, fortran, shape = meta["descr"], meta["fortran_order"], meta["shape"]
    except (ValueError, SyntaxError, KeyError, TypeError):
        raise ValueError(f"{_name(path)}: a .npy header that cannot be read: {header.strip()[:80]!r}") from None
    if descr not in _NPY_DESCR or len(shape) != 1 or fortran:
        raise ValueError(
            f"{_name(path)} holds a {descr} array of shape {shape}; bpe decodes 1-D arrays of "
            f"{', '.join(_NPY_DESCR.values())}"
        )
    return _NPY_DESCR[descr], 0 if path == "-" else 10 + size_bytes - 2 + length


def _read_exactly(fd: int, n: int, path: str) -> bytes:
    data = b""
    while len(data) < n:
        more = os.read(fd, n - len(data))
        if not more:
            raise ValueError(f"{_name(path)} is not a .npy file: it ends inside the header")
        data += more
    return data


def _name(path: str) -> str:
    return "<stdin>" if path == "-" else path
