"""Tokenizer files and pickling: save/load round trips, every way a file can be
bad, atomic saves, and tokenizers crossing process boundaries.

One small tokenizer is trained per module (on ~150 KB of tinyshakespeare with a
few hundred tokens), so the whole file runs in a few seconds.
"""

from __future__ import annotations

import concurrent.futures
import copy
import errno
import hashlib
import json
import multiprocessing
import os
import pickle
import re
import stat
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

import bpe
import bpe.files
import bpe.tokenizer

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
SHAKESPEARE = CORPORA / "tinyshakespeare.txt"
MULTILINGUAL = CORPORA / "multilingual_udhr.txt"

TRAIN_BYTES = 150_000
VOCAB = 400

# A regex of our own (not one of the built-in names), in the regex dialect the
# core accepts; it splits into runs of word characters, spaces and the rest.
CUSTOM_PATTERN = r"\s+|\w+|[^\s\w]+"

# Special tokens that stress the file format: spaces, quotes, backslashes, a
# newline (the format is line based) and non-ASCII text.
AWKWARD_SPECIALS = [
    "<|endoftext|>",
    "<|fim middle|>",
    'quote " and \\ backslash',
    "new\nline",
    "ünï 🙂",
]


# -- fixtures ---------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The first ~150 KB of tinyshakespeare, as a file of its own."""
    text = SHAKESPEARE.read_bytes()[:TRAIN_BYTES].decode("utf-8", errors="ignore")
    path = tmp_path_factory.mktemp("corpus") / "shakespeare.txt"
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.fixture(scope="module")
def sample() -> str:
    """Text the tokenizers were not trained on: more Shakespeare, some
    non-Latin scripts, emoji, digits and odd whitespace."""
    shakespeare = SHAKESPEARE.read_bytes()[TRAIN_BYTES : TRAIN_BYTES + 8000].decode("utf-8", errors="ignore")
    multilingual = MULTILINGUAL.read_text(encoding="utf-8")
    middle = len(multilingual) // 2
    return (
        shakespeare
        + multilingual[middle : middle + 3000]
        + "\nemoji: 🙂👍🏽🇫🇷 digits: 1234567890 tabs:\t\t crlf:\r\n end   "
    )


@pytest.fixture(scope="module")
def tok(corpus) -> bpe.Tokenizer:
    return bpe.Tokenizer.train(corpus, VOCAB, progress=False)


@pytest.fixture(scope="module")
def saved(tok, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "tok.bpe"
    tok.save(path)
    return path


@pytest.fixture
def good_bytes(saved) -> bytes:
    return saved.read_bytes()


def assert_same_tokenizer(a: bpe.Tokenizer, b: bpe.Tokenizer, sample: str) -> None:
    assert list(a.merges.items()) == list(b.merges.items())  # order matters
    assert a.vocab == b.vocab
    assert a.pattern == b.pattern
    assert list(a.special_tokens.items()) == list(b.special_tokens.items())
    assert a.n_vocab == b.n_vocab
    assert a == b
    assert a.encode_ordinary(sample) == b.encode_ordinary(sample)
    assert a.encode(sample, allowed_special="all") == b.encode(sample, allowed_special="all")
    if a.special_tokens:
        with_specials = sample[:500] + "".join(a.special_tokens) + sample[500:1000]
        ids = a.encode(with_specials, allowed_special="all")
        assert ids == b.encode(with_specials, allowed_special="all")
        assert set(a.special_tokens.values()) <= set(ids)
        assert b.decode(ids) == with_specials


# -- save -> load round trips ----------------------------------------------


TRAIN_CONFIGS = {
    "default": dict(),
    "gpt2-pattern": dict(pattern="gpt2"),
    "gpt4o-pattern": dict(pattern="gpt4o"),
    "custom-regex": dict(pattern=CUSTOM_PATTERN),
    "several-specials": dict(special_tokens=AWKWARD_SPECIALS),
    "no-specials": dict(special_tokens=()),
}


@pytest.mark.parametrize("config", list(TRAIN_CONFIGS), ids=list(TRAIN_CONFIGS))
def test_save_load_round_trip(config, corpus, sample, tmp_path):
    kwargs = TRAIN_CONFIGS[config]
    original = bpe.Tokenizer.train(corpus, VOCAB, progress=False, **kwargs)
    path = tmp_path / "tok.bpe"
    original.save(path)
    loaded = bpe.Tokenizer.load(path)

    assert_same_tokenizer(original, loaded, sample)
    assert loaded.decode(loaded.encode(sample, allowed_special="all")) == sample

    # What was asked for is what came back, not just something consistent.
    pattern = kwargs.get("pattern", "gpt4")
    assert loaded.pattern == bpe.PATTERNS.get(pattern, pattern)
    specials = list(kwargs.get("special_tokens", [bpe.ENDOFTEXT]))
    assert list(loaded.special_tokens) == specials
    assert loaded.n_vocab == VOCAB
    # The special tokens take the last ids, in the order given.
    assert list(loaded.special_tokens.values()) == list(range(VOCAB - len(specials), VOCAB))
    assert len(loaded.merges) == VOCAB - 256 - len(specials)

    # Saving what was loaded reproduces the file byte for byte.
    again = tmp_path / "again.bpe"
    loaded.save(again)
    assert again.read_bytes() == path.read_bytes()


def test_round_trip_custom_pattern_is_stored_verbatim(corpus, tmp_path):
    original = bpe.Tokenizer.train(corpus, 300, pattern=CUSTOM_PATTERN, progress=False)
    path = tmp_path / "custom.bpe"
    original.save(path)
    pattern_lines = [l for l in path.read_text(encoding="utf-8").split("\n") if l.startswith("pattern ")]
    assert len(pattern_lines) == 1
    assert json.loads(pattern_lines[0][len("pattern ") :]) == CUSTOM_PATTERN
    assert bpe.Tokenizer.load(path).pattern == CUSTOM_PATTERN


def test_round_trip_without_merges(sample, tmp_path):
    """A tokenizer with only the 256 byte tokens is still a valid file."""
    empty = bpe.Tokenizer(pattern="gpt2", special_tokens={"<|x|>": 256})
    path = tmp_path / "empty.bpe"
    empty.save(path)
    loaded = bpe.Tokenizer.load(path)
    assert_same_tokenizer(empty, loaded, sample)
    assert loaded.merges == {}
    assert loaded.encode_ordinary("abc") == list(b"abc")


def test_load_accepts_str_and_path(saved, tok, sample):
    for path in (saved, str(saved)):
        assert_same_tokenizer(bpe.Tokenizer.load(path), tok, sample)


def test_save_overwrites_and_leaves_no_temp_files(tok, corpus, sample, tmp_path):
    path = tmp_path / "tok.bpe"
    other = bpe.Tokenizer.train(corpus, 300, special_tokens=(), progress=False)
    other.save(path)
    tok.save(path)
    assert_same_tokenizer(bpe.Tokenizer.load(path), tok, sample)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok.bpe"]


# -- bad files ---------------------------------------------------------------


def write_bad(tmp_path: Path, data: bytes, name: str = "bad.bpe") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def load_fails(path: Path) -> str:
    """Loads ``path``, expecting TokenizerFileError naming the file; returns the message."""
    with pytest.raises(bpe.TokenizerFileError) as info:
        bpe.Tokenizer.load(path)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert str(path) in message
    return message


def with_checksum(body: str) -> bytes:
    """A file whose sha256 line matches ``body``: it gets past the checksum
    and tests the parser behind it."""
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return (body + f"sha256 {digest}\n").encode("utf-8")


def body_lines(data: bytes) -> list[str]:
    """The lines of a good file, without the sha256 line and the final ''."""
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == "" and lines[-2].startswith("sha256 ")
    return lines[:-2]


def test_error_class_is_a_value_error():
    assert issubclass(bpe.TokenizerFileError, ValueError)
    assert bpe.TokenizerFileError is bpe.tokenizer.TokenizerFileError


@pytest.mark.parametrize("fraction", [0.10, 0.50, 0.99])
def test_truncated_file(fraction, good_bytes, tmp_path):
    cut = int(len(good_bytes) * fraction)
    assert 0 < cut < len(good_bytes)
    message = load_fails(write_bad(tmp_path, good_bytes[:cut]))
    assert "truncated" in message


def test_truncated_just_before_checksum_line(good_bytes, tmp_path):
    cut = good_bytes.rindex(b"\nsha256 ") + 1
    truncated = good_bytes[:cut]
    assert truncated.endswith(b"\n") and b"sha256" not in truncated
    message = load_fails(write_bad(tmp_path, truncated))
    assert "truncated" in message


def test_truncated_at_every_line_boundary(good_bytes, tmp_path):
    ends = [i + 1 for i, byte in enumerate(good_bytes) if byte == ord("\n")]
    assert ends[-1] == len(good_bytes)
    for n, end in enumerate(ends[:-1]):
        load_fails(write_bad(tmp_path, good_bytes[:end], name=f"cut{n}.bpe"))


def test_truncated_inside_checksum_line(good_bytes, tmp_path):
    start = good_bytes.rindex(b"\nsha256 ") + 1
    for end in range(start + 1, len(good_bytes)):
        load_fails(write_bad(tmp_path, good_bytes[:end], name=f"cut{end}.bpe"))


def test_flipped_digit_in_a_merge_line(good_bytes, tmp_path):
    lines = body_lines(good_bytes)
    first_merge = next(i for i, l in enumerate(lines) if l.startswith("merges ")) + 1
    target = first_merge + (len(lines) - first_merge) // 2
    line = lines[target]
    assert line[0].isdigit()
    flipped = str((int(line[0]) + 1) % 10) + line[1:]
    data = good_bytes.decode("utf-8").replace("\n" + line + "\n", "\n" + flipped + "\n", 1)
    assert data != good_bytes.decode("utf-8")
    message = load_fails(write_bad(tmp_path, data.encode("utf-8")))
    assert "corrupt" in message


def test_changed_pattern_line(good_bytes, tok, tmp_path):
    text = good_bytes.decode("utf-8")
    old = f"pattern {json.dumps(tok.pattern)}\n"
    assert old in text
    new = f"pattern {json.dumps(bpe.GPT2_PATTERN)}\n"
    assert new != old
    message = load_fails(write_bad(tmp_path, text.replace(old, new, 1).encode("utf-8")))
    assert "corrupt" in message


def test_one_flipped_byte_anywhere_is_caught(good_bytes, tmp_path):
    """Every single-character change to the file is detected (checked at a
    spread of positions, not only where the parser would notice)."""
    positions = range(0, len(good_bytes), max(1, len(good_bytes) // 40))
    for pos in positions:
        data = bytearray(good_bytes)
        data[pos] = ord("7") if data[pos] != ord("7") else ord("3")
        load_fails(write_bad(tmp_path, bytes(data), name=f"flip{pos}.bpe"))


@pytest.mark.parametrize(
    "content",
    [
        SHAKESPEARE.read_bytes()[:2000],
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00\x01",
        b'{"merges": [], "vocab": {}}\n',
        b"bpe-tokenize v1\n",
        b"BPE-TOKENIZER V1\n",
    ],
    ids=["text-file", "binary", "json", "misspelled-magic", "upper-case-magic"],
)
def test_not_a_tokenizer_file(content, tmp_path):
    message = load_fails(write_bad(tmp_path, content))
    assert "not a bpe tokenizer file" in message


@pytest.mark.parametrize("recompute_checksum", [False, True])
def test_unsupported_version(recompute_checksum, good_bytes, tmp_path):
    lines = body_lines(good_bytes)
    assert lines[0] == f"{bpe.tokenizer.FILE_MAGIC} v{bpe.tokenizer.FILE_VERSION}"
    lines[0] = "bpe-tokenizer v999"
    body = "\n".join(lines) + "\n"
    if recompute_checksum:
        data = with_checksum(body)
    else:
        data = body.encode("utf-8") + good_bytes[good_bytes.rindex(b"sha256 ") :]
    message = load_fails(write_bad(tmp_path, data))
    assert "v999" in message
    assert "version" in message


def test_empty_file(tmp_path):
    load_fails(write_bad(tmp_path, b""))


def test_missing_file(tmp_path):
    path = tmp_path / "no-such-dir" / "missing.bpe"
    with pytest.raises(FileNotFoundError) as info:
        bpe.Tokenizer.load(path)
    assert str(path) in str(info.value)


# CRLF line endings (git autocrlf) load as the same tokenizer:
# test_reliability.py::test_file_with_windows_line_endings_loads_the_same.


def _edit_merges_header(lines, delta):
    i = next(i for i, l in enumerate(lines) if l.startswith("merges "))
    lines[i] = f"merges {int(lines[i].split()[1]) + delta}"
    return lines


def _replace_first_merge(lines, new):
    i = next(i for i, l in enumerate(lines) if l.startswith("merges ")) + 1
    lines[i] = new
    return lines


def _special_id_clash(lines):
    # Give the special token the id of the first merged token.
    i = next(i for i, l in enumerate(lines) if l.startswith("special_tokens ")) + 1
    text, _, _ = lines[i].rpartition(" ")
    lines[i] = f"{text} 256"
    return lines


# Edits that keep the checksum valid, so the structure checks must catch them.
STRUCTURAL_EDITS = {
    "more-merges-announced": lambda lines: _edit_merges_header(lines, +5),
    "fewer-merges-announced": lambda lines: _edit_merges_header(lines, -5),
    "merge-uses-unknown-id": lambda lines: _replace_first_merge(lines, "99999 3"),
    "merge-not-numbers": lambda lines: _replace_first_merge(lines, "a b"),
    "merge-three-fields": lambda lines: _replace_first_merge(lines, "1 2 3"),
    "invalid-regex": lambda lines: [lines[0], 'pattern "(("', *lines[2:]],
    "pattern-not-json": lambda lines: [lines[0], "pattern ((", *lines[2:]],
    "pattern-not-a-string": lambda lines: [lines[0], "pattern 42", *lines[2:]],
    "missing-pattern-line": lambda lines: [lines[0], *lines[2:]],
    "special-id-clash": _special_id_clash,
    "special-count-too-high": lambda lines: [
        l if not l.startswith("special_tokens ") else "special_tokens 3" for l in lines
    ],
}


@pytest.mark.parametrize("edit", list(STRUCTURAL_EDITS), ids=list(STRUCTURAL_EDITS))
def test_structurally_bad_file_with_valid_checksum(edit, good_bytes, tmp_path):
    lines = STRUCTURAL_EDITS[edit](body_lines(good_bytes))
    data = with_checksum("\n".join(lines) + "\n")
    assert data != good_bytes
    load_fails(write_bad(tmp_path, data))


def test_with_checksum_helper_rebuilds_a_good_file(good_bytes, tok, sample, tmp_path):
    """The helper above is only meaningful if an unedited body loads."""
    data = with_checksum("\n".join(body_lines(good_bytes)) + "\n")
    assert data == good_bytes
    path = write_bad(tmp_path, data, name="rebuilt.bpe")
    assert_same_tokenizer(bpe.Tokenizer.load(path), tok, sample)


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
# bpe.files: a save renames a temporary file over its target, so it first
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

    monkeypatch.setattr(bpe.files.os, "replace", guarded)


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
    with pytest.raises(bpe.files.UsageError) as up_front:
        bpe.files.check_output_file(path)
    assert fragment in str(up_front.value)
    # force is for read-only files; it never replaces a device or a directory.
    with pytest.raises(OSError):
        bpe.files.atomic_write_text(path, "x", force=True)

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
    with pytest.raises(bpe.files.UsageError, match="^/dev/null is a character device"):
        bpe.files.check_output_file("/dev/null")
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
        bpe.files.atomic_write(path, fill)
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

    monkeypatch.setattr(bpe.files.os, "open", spying_open)
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
    assert bpe.files.check_output_file(link) == str(link)

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
    with pytest.raises(bpe.files.UsageError, match=re.escape(expected)):
        bpe.files.check_output_file(link)
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
    with pytest.raises(bpe.files.UsageError, match="is read-only; pass --force"):
        bpe.files.check_output_file(old_file)
    assert old_file.read_bytes() == before

    assert bpe.files.check_output_file(old_file, force=True) == str(old_file)
    bpe.files.atomic_write_text(old_file, "forced\n", force=True)
    assert old_file.read_text() == "forced\n"
    # The replacement keeps the old mode: still read-only, refused again.
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o444
    with pytest.raises(PermissionError):
        bpe.files.atomic_write(old_file, lambda f: f.write(b"again"))
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
    name = bpe.files.temp_path(str(tmp_path / "out.bpe"))
    assert Path(name).parent == tmp_path
    assert bpe.files._temp_file_pid(Path(name).name) == os.getpid()
    assert bpe.files.temp_path(str(tmp_path / "out.bpe")) != name
    others = ["out.bpe", ".bpe-12.tmp", ".bpe-12-abc.tmp", "x.bpe-12-0123456789ab.tmp", ".bpe-12-0123456789ab.tmp~"]
    for other in others:
        assert bpe.files._temp_file_pid(other) is None


def test_a_save_removes_what_dead_writers_left(tok, tmp_path):
    old = bpe.files.STALE_TEMP_SECONDS + 60
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
    stale = left_temp(tmp_path, dead_pid(), bpe.files.STALE_TEMP_SECONDS + 60)

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied (simulated)", path)

    monkeypatch.setattr(bpe.files.os, "unlink", refuse)
    tok.save(tmp_path / "tok.bpe")
    monkeypatch.undo()
    assert stale.exists() and bpe.Tokenizer.load(tmp_path / "tok.bpe") == tok


def test_writing_a_dataset_removes_what_dead_writers_left(saved, corpus, tmp_path):
    import bpe.data

    ds = tmp_path / "ds"
    ds.mkdir()
    stale = left_temp(ds, dead_pid(), bpe.files.STALE_TEMP_SECONDS + 60)
    bpe.data.write_dataset([corpus], saved, ds, progress=False)
    assert sorted(p.name for p in ds.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    assert not stale.exists()


def test_a_dataset_follows_symlinks_and_refuses_a_directory_in_the_way(saved, corpus, tmp_path):
    """The dataset's .bin files follow the same rules as atomic_write."""
    import bpe.data

    ds, disk = tmp_path / "ds", tmp_path / "other-disk"
    ds.mkdir()
    disk.mkdir()
    (ds / "train.bin").symlink_to(disk / "train.bin")  # dangling: created there
    bpe.data.write_dataset([corpus], saved, ds, progress=False)
    assert (ds / "train.bin").is_symlink() and (disk / "train.bin").stat().st_size > 0
    assert temp_files(ds) == [] and temp_files(disk) == []

    (ds / "val.bin").unlink()
    (ds / "val.bin").mkdir()
    before = {p.name: p.read_bytes() for p in ds.iterdir() if p.is_file()}
    with pytest.raises(IsADirectoryError, match=f"^{re.escape(str(ds / 'val.bin'))} is a directory"):
        bpe.data.write_dataset([corpus], saved, ds, progress=False)
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
    monkeypatch.setattr(bpe.files.os, where, _fail_with(errno_, os.strerror(errno_)))
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
    monkeypatch.setattr(bpe.files.os, "replace", lambda src, dst: os.rename(src, tmp_path / "gone" / "x"))
    with pytest.raises(FileNotFoundError) as info:
        tok.save(tmp_path / "tok.bpe")
    assert info.value.filename == str(tmp_path / "tok.bpe") and ".tmp" not in str(info.value)


def test_an_error_about_another_file_is_left_alone(tmp_path):
    """fill may read other files: an error about one of those is not about the target."""
    def fill(f):
        open(tmp_path / "missing-input.txt", "rb")

    with pytest.raises(FileNotFoundError) as info:
        bpe.files.atomic_write(tmp_path / "out.bin", fill)
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
    with pytest.raises(bpe.files.UsageError) as up_front:
        bpe.files.check_output_file(path)
    assert str(up_front.value) == expected
    assert ".tmp" not in "".join(traceback.format_exception(info.value))
    assert sorted(os.listdir()) == ["tok.bpe"]


# -- pickling ----------------------------------------------------------------


def test_equality_is_not_vacuous(tok, corpus):
    """The tests below rely on ==; make sure it tells tokenizers apart."""
    assert tok == tok
    assert tok != bpe.Tokenizer(tok.merges, "gpt2", tok.special_tokens)
    assert tok != bpe.Tokenizer(tok.merges, tok.pattern, {})
    assert tok != bpe.Tokenizer(list(tok.merges)[:-1], tok.pattern, tok.special_tokens)
    assert tok != "not a tokenizer"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(protocol, tok, sample):
    clone = pickle.loads(pickle.dumps(tok, protocol=protocol))
    assert clone is not tok
    assert_same_tokenizer(clone, tok, sample)
    assert clone.encode_batch([sample, sample[::-1]]) == tok.encode_batch([sample, sample[::-1]])


def test_pickle_custom_pattern_and_specials(corpus, sample):
    original = bpe.Tokenizer.train(
        corpus, 350, pattern=CUSTOM_PATTERN, special_tokens=AWKWARD_SPECIALS, progress=False
    )
    clone = pickle.loads(pickle.dumps(original))
    assert_same_tokenizer(clone, original, sample)


def test_copy_and_deepcopy(tok, sample):
    for clone in (copy.copy(tok), copy.deepcopy(tok)):
        assert_same_tokenizer(clone, tok, sample)


def encode_in_worker(tok: bpe.Tokenizer, text: str) -> tuple[int, list[int], list[int]]:
    """Runs in a worker process: the tokenizer arrives pickled."""
    return os.getpid(), tok.encode(text, allowed_special="all"), tok.encode_ordinary(text)


@pytest.mark.parametrize("start_method", [None, "spawn"], ids=["default", "spawn"])
def test_process_pool(start_method, tok, sample):
    texts = [sample[i : i + 1500] for i in range(0, len(sample), 1500)]
    texts.append("before" + bpe.ENDOFTEXT + "after")
    expected = [(tok.encode(t, allowed_special="all"), tok.encode_ordinary(t)) for t in texts]

    context = multiprocessing.get_context(start_method) if start_method else None
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        results = list(pool.map(encode_in_worker, [tok] * len(texts), texts, timeout=120))

    assert [(a, b) for _, a, b in results] == expected
    assert all(pid != os.getpid() for pid, _, _ in results)
    # The special token really went through as a special token.
    assert tok.special_tokens[bpe.ENDOFTEXT] in results[-1][1]
