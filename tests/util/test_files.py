"""How tokenizer files and datasets are written (bpe/_util/files.py): atomic
saves that keep the old file on any failure, what a save may replace (never a
device, a FIFO or a directory; a symlink's target; a read-only file only with
force), the temporary files that killed writers left, and errors that name
the file the user gave, never the temporary one. The file format itself is
tests/formats/test_bpefile.py's.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

import bpe
import bpe._util.files
import bpe.tokenizer
from helpers import SHAKESPEARE

TRAIN_BYTES = 150_000
VOCAB = 400


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The first ~150 KB of tinyshakespeare, as a file of its own."""
    text = SHAKESPEARE.read_bytes()[:TRAIN_BYTES].decode("utf-8", errors="ignore")
    path = tmp_path_factory.mktemp("corpus") / "shakespeare.txt"
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.fixture(scope="module")
def tok(corpus) -> bpe.Tokenizer:
    return bpe.Tokenizer.train(corpus, VOCAB, progress=False)


@pytest.fixture(scope="module")
def saved(tok, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "tok.bpe"
    tok.save(path)
    return path


# -- atomic save -------------------------------------------------------------


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob(".bpe-*.tmp"))


@pytest.fixture
def old_file(tmp_path, corpus):
    """An existing tokenizer file, different from ``tok``, about to be overwritten."""
    path = tmp_path / "tok.bpe"
    bpe.Tokenizer.train(corpus, 300, pattern="gpt2", special_tokens=(), progress=False).save(path)
    return path


def _raise_oserror(*args, **kwargs):
    raise OSError(28, "No space left on device (simulated)")


def _raise_interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "where, error, exc",
    [
        ("replace", _raise_oserror, OSError),
        ("fsync", _raise_oserror, OSError),
        ("fsync", _raise_interrupt, KeyboardInterrupt),
    ],
    ids=["replace-fails", "write-fails", "interrupted"],
)
def test_failed_save_keeps_old_file(where, error, exc, old_file, tok, monkeypatch):
    before = old_file.read_bytes()
    directory = old_file.parent
    # Make sure the temporary file really is created before the failure.
    created = []
    real_open = os.open

    def spying_open(name, flags, *args, **kwargs):
        fd = real_open(name, flags, *args, **kwargs)
        if flags & os.O_CREAT:
            created.append(name)
        return fd

    monkeypatch.setattr(bpe.tokenizer.os, "open", spying_open)
    monkeypatch.setattr(bpe.tokenizer.os, where, error)
    with pytest.raises(exc):
        tok.save(old_file)
    monkeypatch.undo()

    assert len(created) == 1 and Path(created[0]).parent == directory
    assert old_file.read_bytes() == before
    assert temp_files(directory) == []
    assert sorted(p.name for p in directory.iterdir()) == [old_file.name]
    # The old file is still a loadable tokenizer (not the new one).
    assert bpe.Tokenizer.load(old_file) != tok


def test_failed_save_to_new_path_leaves_nothing(tok, tmp_path, monkeypatch):
    path = tmp_path / "new.bpe"
    monkeypatch.setattr(bpe.tokenizer.os, "replace", _raise_oserror)
    with pytest.raises(OSError):
        tok.save(path)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_save_into_missing_directory_fails_cleanly(tok, tmp_path):
    path = tmp_path / "missing" / "tok.bpe"
    with pytest.raises(FileNotFoundError):
        tok.save(path)
    assert list(tmp_path.iterdir()) == []


def test_saved_file_gets_ordinary_permissions(tok, tmp_path):
    fresh = tmp_path / "fresh.bpe"
    tok.save(fresh)
    plain = tmp_path / "plain.txt"  # created with open(): 0o666 minus the umask
    plain.write_text("x")
    assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)

    shared = tmp_path / "shared.bpe"
    tok.save(shared)
    shared.chmod(0o644)
    tok.save(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644


# -- what a save may replace ---------------------------------------------------
# bpe._util.files: a save renames a temporary file over its target, so it first
# checks what it would replace. Checked both in atomic_write (the API path:
# Tokenizer.save calls it directly) and in check_output_file (the CLI, up front).


def never_rename_onto_dev(monkeypatch):
    """Guards the tests that aim at /dev/null: should the refusal ever break,
    the rename fails the test instead of replacing the machine's /dev/null."""
    real = os.replace

    def guarded(src, dst, *args, **kwargs):
        if os.path.realpath(dst).startswith("/dev/"):
            raise AssertionError(f"atomic_write tried to rename a file over {dst}")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(bpe._util.files.os, "replace", guarded)


def make_special(kind: str, directory: Path) -> Path:
    """A file of ``kind`` that is not a regular file, in ``directory``."""
    if kind == "fifo":
        path = directory / "out.fifo"
        os.mkfifo(path)
    elif kind == "socket":
        import socket

        path = directory / "out.sock"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))  # the name stays after close
        sock.close()
    elif kind == "directory":
        path = directory / "out.d"
        path.mkdir()
    else:  # a device, through a symlink of ours: what `-o /dev/null` reaches too
        assert kind == "device"
        path = directory / "null-link"
        path.symlink_to("/dev/null")
    return path


SPECIAL_KINDS = {
    "fifo": ("a FIFO (named pipe), not a regular file", stat.S_ISFIFO),
    "socket": ("a socket, not a regular file", stat.S_ISSOCK),
    "directory": ("is a directory", stat.S_ISDIR),
    "device": ("a character device, not a regular file", stat.S_ISCHR),
}


@pytest.mark.parametrize("kind", list(SPECIAL_KINDS))
def test_save_refuses_to_replace_what_is_not_a_regular_file(kind, tok, tmp_path, monkeypatch):
    never_rename_onto_dev(monkeypatch)
    path = make_special(kind, tmp_path)
    before = os.stat(path)
    fragment, still = SPECIAL_KINDS[kind]

    with pytest.raises(OSError, match="^" + re.escape(str(path))) as info:
        tok.save(path)
    assert fragment in str(info.value)
    with pytest.raises(bpe._util.files.UsageError) as up_front:
        bpe._util.files.check_output_file(path)
    assert fragment in str(up_front.value)
    # force is for read-only files; it never replaces a device or a directory.
    with pytest.raises(OSError):
        bpe._util.files.atomic_write_text(path, "x", force=True)

    after = os.stat(path)
    assert still(after.st_mode)
    assert (after.st_ino, after.st_dev, after.st_rdev) == (before.st_ino, before.st_dev, before.st_rdev)
    assert temp_files(tmp_path) == [] and temp_files(Path("/dev")) == []


def test_save_to_dev_null_itself_is_refused(tok, monkeypatch):
    """The reported case, `-o /dev/full` as root, on a real device name."""
    never_rename_onto_dev(monkeypatch)
    rdev = os.stat("/dev/null").st_rdev
    with pytest.raises(OSError, match=r"^/dev/null is a character device, not a regular file: .*give a file path$"):
        tok.save("/dev/null")
    with pytest.raises(bpe._util.files.UsageError, match="^/dev/null is a character device"):
        bpe._util.files.check_output_file("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and os.stat("/dev/null").st_rdev == rdev


def test_a_target_that_becomes_a_fifo_during_the_write_is_not_replaced(tmp_path, monkeypatch):
    """The check runs again just before the rename: fill may take minutes."""
    path = tmp_path / "out.txt"
    path.write_text("old")

    def fill(f):
        f.write(b"new")
        path.unlink()
        os.mkfifo(path)  # what the target is by the time of the rename

    with pytest.raises(OSError, match="a FIFO"):
        bpe._util.files.atomic_write(path, fill)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert temp_files(tmp_path) == []


def spy_created_files(monkeypatch) -> list[str]:
    """The names that os.open creates from now on (the temporary files)."""
    created = []
    real_open = os.open

    def spying_open(name, flags, *args, **kwargs):
        fd = real_open(name, flags, *args, **kwargs)
        if flags & os.O_CREAT:
            created.append(os.fspath(name))
        return fd

    monkeypatch.setattr(bpe._util.files.os, "open", spying_open)
    return created


def test_save_through_a_symlink_writes_its_target(tok, old_file, tmp_path, monkeypatch):
    """`-o link.bpe` writes the file the link names, atomically beside it; the
    link stays a link (it used to be replaced by a plain file)."""
    elsewhere = tmp_path / "models"
    elsewhere.mkdir()
    target = elsewhere / "real.bpe"
    target.write_bytes(old_file.read_bytes())
    link = tmp_path / "link.bpe"
    link.symlink_to(os.path.join("models", "real.bpe"))  # relative: to the link's directory
    created = spy_created_files(monkeypatch)

    tok.save(link)
    assert bpe._util.files.check_output_file(link) == str(link)

    assert link.is_symlink() and os.readlink(link) == os.path.join("models", "real.bpe")
    assert bpe.Tokenizer.load(target) == tok
    assert len(created) == 1 and Path(created[0]).parent == elsewhere  # the temporary file: beside the target
    assert temp_files(tmp_path) == [] and temp_files(elsewhere) == []


def test_save_through_a_chain_of_symlinks(tok, tmp_path):
    (tmp_path / "real.bpe").write_text("old")
    (tmp_path / "middle").symlink_to("real.bpe")
    (tmp_path / "first").symlink_to(tmp_path / "middle")  # absolute
    tok.save(tmp_path / "first")
    assert (tmp_path / "first").is_symlink() and (tmp_path / "middle").is_symlink()
    assert bpe.Tokenizer.load(tmp_path / "real.bpe") == tok


def test_save_through_a_dangling_symlink_creates_its_target(tok, tmp_path):
    link = tmp_path / "link.bpe"
    link.symlink_to("new.bpe")
    assert not link.exists()
    tok.save(link)
    assert link.is_symlink() and bpe.Tokenizer.load(tmp_path / "new.bpe") == tok


def test_dangling_symlink_into_a_missing_directory_is_refused(tok, tmp_path):
    link = tmp_path / "link.bpe"
    link.symlink_to(tmp_path / "gone" / "new.bpe")
    gone = tmp_path / "gone"
    expected = f"cannot write {link} (a symlink to {gone / 'new.bpe'}): directory {gone} does not exist"
    with pytest.raises(FileNotFoundError) as info:
        tok.save(link)
    assert str(info.value) == expected
    with pytest.raises(bpe._util.files.UsageError, match=re.escape(expected)):
        bpe._util.files.check_output_file(link)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.bpe"]


def test_symlink_loop_is_refused(tok, tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError, match="too many levels of symbolic links"):
        tok.save(tmp_path / "a")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_read_only_file_is_refused_unless_forced(tok, old_file, tmp_path):
    """A file with no w bit for anyone (`chmod a-w`) is refused, for root too:
    the mode bits decide, not the kernel (which lets root write anything, and
    lets anyone rename over a file in a directory they may write)."""
    before = old_file.read_bytes()
    old_file.chmod(0o444)

    with pytest.raises(PermissionError) as info:
        tok.save(old_file)
    assert str(info.value) == f"{old_file} is read-only; pass --force to replace it, or chmod u+w {old_file}"
    with pytest.raises(bpe._util.files.UsageError, match="is read-only; pass --force"):
        bpe._util.files.check_output_file(old_file)
    assert old_file.read_bytes() == before

    assert bpe._util.files.check_output_file(old_file, force=True) == str(old_file)
    bpe._util.files.atomic_write_text(old_file, "forced\n", force=True)
    assert old_file.read_text() == "forced\n"
    # The replacement keeps the old mode: still read-only, refused again.
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o444
    with pytest.raises(PermissionError):
        bpe._util.files.atomic_write(old_file, lambda f: f.write(b"again"))
    assert temp_files(tmp_path) == []


def test_one_w_bit_is_enough(tok, old_file):
    """Only a file no one may write is read-only: one w bit (here the group's)
    lets it be replaced. The mode is kept exactly: the umask (usually 022)
    would have taken the group's w bit away, and made the file read-only."""
    old_file.chmod(0o464)
    tok.save(old_file)
    assert bpe.Tokenizer.load(old_file) == tok
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o464


# -- temporary files that killed processes left --------------------------------


def dead_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError):  # the premise: nothing has that PID now
        os.kill(child.pid, 0)
    return child.pid


def left_temp(directory: Path, pid: int, age_seconds: float, name: str | None = None) -> Path:
    """A temporary file as a process ``pid`` killed mid-write would leave it."""
    path = directory / (name or f".bpe-{pid}-{os.urandom(6).hex()}.tmp")
    path.write_bytes(b"half a file")
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return path


def test_temp_names_are_the_ones_cleaning_looks_for(tmp_path):
    name = bpe._util.files.temp_path(str(tmp_path / "out.bpe"))
    assert Path(name).parent == tmp_path
    assert bpe._util.files._temp_file_pid(Path(name).name) == os.getpid()
    assert bpe._util.files.temp_path(str(tmp_path / "out.bpe")) != name
    others = ["out.bpe", ".bpe-12.tmp", ".bpe-12-abc.tmp", "x.bpe-12-0123456789ab.tmp", ".bpe-12-0123456789ab.tmp~"]
    for other in others:
        assert bpe._util.files._temp_file_pid(other) is None


def test_a_save_removes_what_dead_writers_left(tok, tmp_path):
    old = bpe._util.files.STALE_TEMP_SECONDS + 60
    dead = dead_pid()
    stale = left_temp(tmp_path, dead, old)
    kept = [
        left_temp(tmp_path, os.getpid(), old),  # alive: this process
        left_temp(tmp_path, 1, old),  # alive (init); to a non-root user, os.kill says PermissionError
        left_temp(tmp_path, dead, 5),  # dead, but just written: maybe a writer bpe cannot see
        left_temp(tmp_path, dead, old, name=f".bpe-{dead}-mine.tmp"),  # not our name pattern
        left_temp(tmp_path, dead, old, name=f"bpe-{dead}-0123456789ab.tmp"),
    ]
    directory_named_like_one = tmp_path / f".bpe-{dead}-0123456789ab.tmp"
    directory_named_like_one.mkdir()
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    kept.append(left_temp(elsewhere, dead, old))  # only the target's directory is cleaned

    tok.save(tmp_path / "tok.bpe")

    assert not stale.exists()
    assert all(p.exists() for p in kept) and directory_named_like_one.is_dir()
    assert bpe.Tokenizer.load(tmp_path / "tok.bpe") == tok


def test_cleaning_that_fails_never_fails_the_save(tok, tmp_path, monkeypatch):
    stale = left_temp(tmp_path, dead_pid(), bpe._util.files.STALE_TEMP_SECONDS + 60)

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied (simulated)", path)

    monkeypatch.setattr(bpe._util.files.os, "unlink", refuse)
    tok.save(tmp_path / "tok.bpe")
    monkeypatch.undo()
    assert stale.exists() and bpe.Tokenizer.load(tmp_path / "tok.bpe") == tok


def test_writing_a_dataset_removes_what_dead_writers_left(saved, corpus, tmp_path):
    import bpe.data.dataset

    ds = tmp_path / "ds"
    ds.mkdir()
    stale = left_temp(ds, dead_pid(), bpe._util.files.STALE_TEMP_SECONDS + 60)
    bpe.data.dataset.write_dataset([corpus], saved, ds, progress=False)
    assert sorted(p.name for p in ds.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    assert not stale.exists()


def test_a_dataset_follows_symlinks_and_refuses_a_directory_in_the_way(saved, corpus, tmp_path):
    """The dataset's .bin files follow the same rules as atomic_write."""
    import bpe.data.dataset

    ds, disk = tmp_path / "ds", tmp_path / "other-disk"
    ds.mkdir()
    disk.mkdir()
    (ds / "train.bin").symlink_to(disk / "train.bin")  # dangling: created there
    bpe.data.dataset.write_dataset([corpus], saved, ds, progress=False)
    assert (ds / "train.bin").is_symlink() and (disk / "train.bin").stat().st_size > 0
    assert temp_files(ds) == [] and temp_files(disk) == []

    (ds / "val.bin").unlink()
    (ds / "val.bin").mkdir()
    before = {p.name: p.read_bytes() for p in ds.iterdir() if p.is_file()}
    with pytest.raises(IsADirectoryError, match=f"^{re.escape(str(ds / 'val.bin'))} is a directory"):
        bpe.data.dataset.write_dataset([corpus], saved, ds, progress=False)
    assert (ds / "val.bin").is_dir()
    assert {p.name: p.read_bytes() for p in ds.iterdir() if p.is_file()} == before
    assert temp_files(ds) == [] and temp_files(disk) == []


# -- errors name the file the user gave, never the temporary file ----------------


def _fail_with(errno_: int, text: str):
    def fail(*args, **kwargs):
        raise OSError(errno_, text, *(a for a in args[:2] if isinstance(a, str)))  # as os.* would: with the names
    return fail


@pytest.mark.parametrize(
    "where, errno_",
    [("open", errno.EROFS), ("fsync", errno.EIO), ("replace", errno.ENOSPC), ("replace", errno.EXDEV)],
)
def test_os_errors_name_the_target_not_the_temporary_file(where, errno_, tok, tmp_path, monkeypatch):
    path = tmp_path / "tok.bpe"
    monkeypatch.setattr(bpe._util.files.os, where, _fail_with(errno_, os.strerror(errno_)))
    with pytest.raises(OSError) as info:
        tok.save(path)
    monkeypatch.undo()
    e = info.value
    assert type(e) is OSError and e.errno == errno_  # the type and errno are kept
    assert e.filename == str(path) and e.filename2 is None
    assert str(e) == f"[Errno {errno_}] {os.strerror(errno_)}: {str(path)!r}"
    assert ".tmp" not in "".join(traceback.format_exception(e))
    assert list(tmp_path.iterdir()) == []


def test_os_error_subclasses_stay_subclasses(tok, tmp_path, monkeypatch):
    monkeypatch.setattr(bpe._util.files.os, "replace", lambda src, dst: os.rename(src, tmp_path / "gone" / "x"))
    with pytest.raises(FileNotFoundError) as info:
        tok.save(tmp_path / "tok.bpe")
    assert info.value.filename == str(tmp_path / "tok.bpe") and ".tmp" not in str(info.value)


def test_an_error_about_another_file_is_left_alone(tmp_path):
    """fill may read other files: an error about one of those is not about the target."""
    def fill(f):
        open(tmp_path / "missing-input.txt", "rb")

    with pytest.raises(FileNotFoundError) as info:
        bpe._util.files.atomic_write(tmp_path / "out.bin", fill)
    assert info.value.filename == str(tmp_path / "missing-input.txt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "path, expected",
    [
        ("", "an empty output path: give a file name"),
        ("nodir/x", "cannot write nodir/x: directory nodir does not exist"),
        ("tok.bpe/x", "cannot write tok.bpe/x: tok.bpe is not a directory"),
    ],
    ids=["empty", "missing-directory", "file-as-directory"],
)
def test_bad_output_paths_have_one_clear_line(path, expected, tok, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("tok.bpe").write_text("a file")
    with pytest.raises(OSError) as info:  # FileNotFoundError, NotADirectoryError
        tok.save(path)
    assert str(info.value) == expected
    with pytest.raises(bpe._util.files.UsageError) as up_front:
        bpe._util.files.check_output_file(path)
    assert str(up_front.value) == expected
    assert ".tmp" not in "".join(traceback.format_exception(info.value))
    assert sorted(os.listdir()) == ["tok.bpe"]
