"""Files: the checks made before reading or writing one, and atomic writes.

Everything that opens a user's file for bpe goes through here, so that a
missing file, a directory, a pipe, a binary or UTF-16 file, or an output that
cannot be written gives the same one-line error in the API and the CLI, and a
write never leaves half a file behind.

Writing. Every output (tokenizer files, a dataset's files, checkpoints) is
written to a temporary file beside the target, ``.bpe-PID-RANDOM.tmp``,
synced, then renamed over the target. The rename makes the write atomic, and
would also replace whatever has the target's name, so :func:`atomic_write`
first checks what it is about to replace:

- Only a regular file (or nothing) is replaced. A device, a FIFO, a socket or
  a directory is refused: ``-o /dev/full`` as root once swapped the device
  node for a plain file.
- A symlink is followed: the file it names is written (the temporary file goes
  beside that file and is renamed over it) and the link stays a link, as the
  shell's ``>`` would have it. A dangling link creates the file it names if
  that file's directory exists, and is refused otherwise.
- A read-only file, one with no w bit for anyone (``chmod a-w``), is refused
  unless ``force=True`` (the CLI's ``--force``). The mode bits decide, not the
  kernel, and the same for root as for anyone: replacing a file needs write
  permission on its directory, not on the file, and root may write anything,
  so asking the kernel would protect nothing. A replaced file keeps its mode:
  forced over a read-only file, the new one is read-only too.

These checks run up front (:func:`check_output_file`, before long work) and
again when writing (:func:`atomic_write`: before the temporary file is made
and just before the rename). Errors name the target, never the temporary file.

A process killed mid-write (SIGKILL, a power cut) leaves its temporary file
behind. The name holds the writer's PID, so a later write into the same
directory removes it once that process is gone (:func:`remove_stale_temps`).
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
from typing import BinaryIO, Callable, Union

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


# -- writing -------------------------------------------------------------------

#: Stale temporary files are removed only when also untouched for this long, a
#: guard for writers bpe cannot see: a process in another PID namespace (a
#: container) or on another host sharing the directory looks dead to
#: os.kill. A live writer keeps its file's mtime fresh as it writes.
STALE_TEMP_SECONDS = 10 * 60

# The temporary files' names, `.bpe-PID-RANDOM.tmp`: made by temp_path, read
# back by _temp_file_pid. Hidden (a dot), and never a name bpe writes for good.
_TEMP_NAME = re.compile(r"\.bpe-(\d+)-[0-9a-f]{12}\.tmp")


def temp_path(target: str) -> str:
    """A fresh temporary file name in ``target``'s directory (a rename within
    one directory is atomic; across file systems it would not even work)."""
    return os.path.join(os.path.dirname(target), f".bpe-{os.getpid()}-{secrets.token_hex(6)}.tmp")


def _temp_file_pid(name: str) -> int | None:
    """The PID in a name made by :func:`temp_path`, or None for any other name."""
    m = _TEMP_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def _is_dead(pid: int) -> bool:
    """True only if no process ``pid`` exists (signal 0 checks, sends nothing)."""
    if pid <= 0:  # os.kill(0, ...) would signal our own process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: alive, someone else's
        return False
    return False


def remove_stale_temps(directory: str) -> None:
    """Removes temporary files that dead bpe processes left in ``directory``:
    regular files named by :func:`temp_path` whose PID is gone and which are
    older than ``STALE_TEMP_SECONDS``. Nothing else, nothing elsewhere, and it
    never fails: a file it cannot remove stays."""
    if os.name != "posix":  # os.kill(pid, 0) on Windows would end the process
        return
    cutoff = time.time() - STALE_TEMP_SECONDS  # modified since: maybe still being written
    try:
        with os.scandir(directory or ".") as entries:
            for entry in entries:
                pid = _temp_file_pid(entry.name)
                if pid is None or not entry.is_file(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_mtime < cutoff and _is_dead(pid):
                    try:
                        os.unlink(entry.path)
                    except OSError:
                        pass
    except OSError:
        pass


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, for a message."""
    for test, name in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


#: Links followed before giving up, as Linux's open() does (ELOOP).
MAX_SYMLINKS = 40


def output_target(path: PathLike, *, force: bool = False, what: str = "a file name") -> str:
    """The file that writing ``path`` replaces (``path`` with its symlinks
    followed), after checking that it may be replaced (see the module's
    docstring); otherwise raises an OSError subclass with a one-line message
    naming ``path``. Write to :func:`temp_path` of the result and rename."""
    p = os.fspath(path)
    if not p:
        raise FileNotFoundError("an empty output path: give a file name")
    target = p
    for _ in range(MAX_SYMLINKS):
        if not os.path.islink(target):
            break
        # A relative link is relative to the link's own directory.
        target = os.path.join(os.path.dirname(target), os.readlink(target))
    else:
        raise OSError(f"cannot write {p}: too many levels of symbolic links (a loop?)")
    shown = _shown(p, target)
    directory = os.path.dirname(target) or "."
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise NotADirectoryError(f"cannot write {shown}: {directory} is not a directory")
        raise FileNotFoundError(f"cannot write {shown}: directory {directory} does not exist")
    _check_replaceable(target, shown, force=force, what=what)
    if not os.access(directory, os.W_OK):
        raise PermissionError(f"cannot write {shown}: directory {directory} is not writable")
    return target


def _shown(path: str, target: str) -> str:
    """The output file in a message: as the user wrote it, and where it leads."""
    return path if target == path else f"{path} (a symlink to {target})"


def _check_replaceable(target: str, shown: str, *, force: bool, what: str = "a file name") -> None:
    """Refuses to replace anything but a regular file, and a read-only file
    unless ``force``. Nothing there at all is fine."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{shown} is a directory; give {what}")
    if not stat.S_ISREG(st.st_mode):
        raise OSError(
            f"{shown} is {_kind(st.st_mode)}, not a regular file: bpe writes files atomically "
            f"by replacing them; give a file path"
        )
    if not force and st.st_mode & 0o222 == 0:
        raise PermissionError(f"{shown} is read-only; pass --force to replace it, or chmod u+w {target}")


def check_output_file(path: PathLike, *, what: str = "a file name for the output", force: bool = False) -> str:
    """Fails before long work, not after it, when ``path`` cannot be written:
    it is empty, not a regular file (a directory, a device...), read-only
    (unless ``force``), or its directory is missing or not writable. Raises
    :class:`UsageError`; returns the path as str. :func:`atomic_write` checks
    the same again when it writes."""
    try:
        output_target(path, force=force, what=what)
    except OSError as e:
        raise UsageError(str(e)) from None
    return os.fspath(path)


def atomic_write_text(path: PathLike, text: str, *, force: bool = False) -> None:
    """Writes a UTF-8 text file atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")), force=force)


def atomic_write(path: PathLike, fill: Callable[[BinaryIO], object], *, force: bool = False) -> None:
    """Writes a file atomically: ``fill(f)`` writes into a temporary binary
    file beside the target, which is flushed to disk and then renamed over the
    target (rename is atomic on POSIX). A crash or Ctrl-C at any point leaves
    either the old file or the new one, never a partial one.

    A symlink's target is written; anything but a regular file is refused,
    and a read-only file unless ``force`` (see the module's docstring).
    Refusals are OSError subclasses with a one-line message; an OSError while
    writing keeps its type and names ``path`` (``.filename``), never the
    temporary file."""
    p = os.fspath(path)
    target = output_target(p, force=force)
    remove_stale_temps(os.path.dirname(target))
    try:
        keep_mode = stat.S_IMODE(os.stat(target).st_mode)  # the mode of the file we replace
    except FileNotFoundError:
        keep_mode = None
    # Not tempfile.mkstemp: it forces mode 0600 on the result. A new file gets
    # 0666 minus the umask, as open() would give it.
    tmp = temp_path(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        _name_target(e, tmp, p)
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            if keep_mode is not None:
                os.fchmod(f.fileno(), keep_mode)  # exactly: the umask would take bits away
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        # Again: fill may have taken minutes, and the target may have changed.
        _check_replaceable(target, _shown(p, target), force=force)
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            _name_target(e, tmp, p)
        raise


def _name_target(error: OSError, tmp: str, target: str) -> None:
    """Makes an error about the temporary file (or about no file: a failed
    write or fsync) name the target instead; the user never saw ``tmp``.
    Changed in place, so the error keeps its type and errno. Our own refusals
    (a message, no errno) and errors about other files are left alone."""
    if error.filename == tmp or (error.filename is None and error.strerror is not None):
        error.filename = target
        del error.filename2  # unset: set to None it would print as "-> None"


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
