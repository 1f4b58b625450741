"""Encoding and decoding as streams, for the command line: from files or
standard input (``-``) to an open file descriptor (stdout, or the temporary
file of an atomic ``-o FILE``), in bounded memory.

The Rust core reads, cuts, encodes and writes (``rust/py/stream.rs``); this
module chooses the formats and handles ``.npy``'s header, whose length field
is only known at the end: it is written first with room for any count, then
rewritten in place (so ``.npy`` output needs a file, not a pipe).

Formats of encoded ids:
  ``ids``    one line per input, ids separated by spaces
  ``json``   one JSON array per input, a line each (JSON Lines)
  ``numpy``  one ``.npy`` array of all ids (uint16, or uint32 past 65,536
             tokens), ``<|endoftext|>`` between inputs when the tokenizer has it
"""

from __future__ import annotations

import ast
import os
import struct
from typing import Callable, Sequence

from bpe import _core
from bpe.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer

TEXT_FORMATS = ("ids", "json")
FORMATS = (*TEXT_FORMATS, "numpy")

#: The dtypes a ``.bin`` or ``.npy`` of ids may have, as (width, signed).
DTYPES = {"uint16": (2, False), "uint32": (4, False), "int32": (4, True), "int64": (8, True), "uint64": (8, False)}
_NPY_DESCR = {"<u2": "uint16", "<u4": "uint32", "<i4": "int32", "<i8": "int64", "<u8": "uint64"}


def _width(tok: Tokenizer) -> int:
    return 2 if tok.n_vocab - 1 <= 0xFFFF else 4


def encode_to_fd(
    tok: Tokenizer,
    paths: Sequence[str],
    fd: int,
    fmt: str,
    *,
    allowed_special: Sequence[str] = (),
    disallowed_special: Sequence[str] = (),
    num_threads: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[int]:
    """Encodes each of ``paths`` (``-``: stdin) and writes the ids to ``fd``
    in ``fmt`` (see the module's docstring); returns the ids per input."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    args = (list(allowed_special), list(disallowed_special))
    if fmt in TEXT_FORMATS:
        return _core.encode_to_fd(tok._core, list(paths), fd, fmt, *args, None, num_threads, 4, progress)
    width = _width(tok)
    header_at = os.lseek(fd, 0, os.SEEK_CUR)
    os.write(fd, npy_header(width, 0))
    counts = _core.encode_to_fd(
        tok._core, list(paths), fd, "binary", *args, tok.special_tokens.get(ENDOFTEXT), num_threads, width, progress
    )
    end = os.lseek(fd, 0, os.SEEK_CUR)
    os.lseek(fd, header_at, os.SEEK_SET)
    os.write(fd, npy_header(width, sum(counts)))
    os.lseek(fd, end, os.SEEK_SET)
    return counts


def count_tokens(
    tok: Tokenizer, paths: Sequence[str], *, allowed_special=(), disallowed_special=(), num_threads: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[int]:
    """The number of ids of each of ``paths``, nothing kept but the counts."""
    return _core.encode_to_fd(
        tok._core, list(paths), -1, "count", list(allowed_special), list(disallowed_special), None,
        num_threads, 4, progress,
    )


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
