"""Files: the checks made before reading or writing one, and atomic writes.

Everything that opens a user's file for bpe goes through here, so that a
missing file, a directory, a pipe, a binary or UTF-16 file, or an output that
cannot be written gives the same one-line error in the API and the CLI, and a
write never leaves half a file behind.
"""

from __future__ import annotations

import os
import secrets
import stat
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]

#: A corpus file whose first this-many bytes hold a NUL byte is refused as
#: binary (as git and grep decide).
BINARY_SNIFF_BYTES = 64 << 10


class UsageError(ValueError):
    """A problem with the user's input, reported by the CLI in one line."""


def check_readable_file(path: PathLike) -> str:
    """Returns the path as str, or raises a clear error if it is not a readable file."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p} is a directory, not a text file")
    if not os.path.exists(p):
        raise FileNotFoundError(f"{p}: no such file")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"{p}: permission denied")
    if not stat.S_ISREG(os.stat(p).st_mode):
        # A pipe (`<(zcat c.gz)`), socket or device can be read only once, and
        # files are read twice (the binary check here, then the text), so the
        # text would silently lose its start. Refuse rather than lose data.
        raise ValueError(
            f"{p} is not a regular file (a pipe or a device): bpe reads text files more than "
            f"once; save the text to a file first (e.g. `zcat corpus.gz > corpus.txt`)"
        )
    return p


def check_text_file(path: PathLike) -> str:
    """:func:`check_readable_file`, and refuses a binary file: one whose first
    ``BINARY_SNIFF_BYTES`` bytes hold a NUL byte (no text file has one)."""
    p = check_readable_file(path)
    with open(p, "rb") as f:
        head = f.read(BINARY_SNIFF_BYTES)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(
            f"{p} looks like UTF-16 (or UTF-32) text: it starts with a byte-order mark; "
            f"convert it to UTF-8 first (e.g. `iconv -f utf-16 -t utf-8 {p} > out.txt`)"
        )
    nul = head.find(b"\0")
    if nul >= 0:
        line = head.count(b"\n", 0, nul) + 1
        raise ValueError(
            f"{p} looks like a binary file, not text: it has a NUL byte at byte offset {nul} "
            f"(line {line}); give UTF-8 text files"
        )
    return p


def atomic_write_text(path: PathLike, text: str) -> None:
    """Writes a UTF-8 text file atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def atomic_write(path: PathLike, fill) -> None:
    """Writes a file atomically: ``fill(f)`` writes into a temporary binary
    file beside the target, which is flushed to disk and then renamed over the
    target (rename is atomic on POSIX). A crash or Ctrl-C at any point leaves
    either the old file or the new one, never a partial one."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # keep the mode of the file we replace
    except FileNotFoundError:
        mode = 0o666  # as open() would; the kernel applies the umask
    # Not tempfile.mkstemp: it forces mode 0600 on the result.
    tmp = os.path.join(directory, f".bpe-{os.getpid()}-{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_output_file(path: PathLike, *, what: str = "a file name for the output") -> str:
    """Fails before long work, not after it, when ``path`` cannot be written:
    it is a directory, or its directory is missing or not writable."""
    p = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(p)) or "."
    if os.path.isdir(p):
        raise UsageError(f"{p} is a directory; give {what}")
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write {p}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise UsageError(f"cannot write {p}: directory {directory} is not writable")
    return p


def read_text(path: PathLike) -> str:
    """A whole UTF-8 file as str; an invalid byte is named by offset and line."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UsageError(
            f"{os.fspath(path)} is not valid UTF-8 at byte offset {e.start} (line {line}); convert it to UTF-8"
        ) from None
