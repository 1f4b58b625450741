"""How the `bpe` command fails, run in a child process (tests/helpers.py):
exit status 1 (2 for a command line argparse cannot read), one line on
stderr naming what is wrong, no traceback, and no output file, partial or
temporary; what it must not replace (devices, read-only files) it refuses.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import assert_clean_failure, no_temp_files, ok, run
from helpers import bad_utf8, corpus, corrupt_tok, tok, tok_path, workdir  # noqa: F401  (fixtures)


# -- bad input ---------------------------------------------------------------

# Each case: the arguments, with {placeholders} filled in by the test; pieces
# of text the error line must contain; optionally whether it is an argparse
# usage error (exit status 2) and what to send on stdin. Commands that would
# write a file write it to {out} (or {out_in_missing_dir}), which must not
# exist afterwards.
BAD_INPUT = {
    "train-missing-file": (["train", "{missing}", "--vocab", "500", "-o", "{out}"], ["{missing}"]),
    "train-directory": (["train", "{dir}", "--vocab", "500", "-o", "{out}"], ["{dir}", "directory"]),
    "train-not-utf8": (["train", "{bad_utf8}", "--vocab", "500", "-o", "{out}"], ["{bad_utf8}", "offset 5"]),
    "train-one-bad-file-of-two": (
        ["train", "{corpus}", "{bad_utf8}", "--vocab", "500", "-o", "{out}"],
        ["{bad_utf8}", "offset 5"],
    ),
    "train-vocab-too-small": (["train", "{corpus}", "--vocab", "100", "-o", "{out}"], ["100", "257"]),
    "train-vocab-too-small-for-specials": (
        ["train", "{corpus}", "--vocab", "257", "--special", "<|a|>", "--special", "<|b|>", "-o", "{out}"],
        ["257", "258"],
    ),
    "train-vocab-too-small-no-special": (
        ["train", "{corpus}", "--vocab", "255", "--no-special", "-o", "{out}"],
        ["255", "256"],
    ),
    "train-vocab-banana": (["train", "{corpus}", "--vocab", "banana", "-o", "{out}"], ["banana"], True),
    "train-vocab-missing": (["train", "{corpus}", "-o", "{out}"], ["--vocab"], True),
    "train-no-files": (["train", "--vocab", "500", "-o", "{out}"], [], True),
    "train-pattern-unknown-name": (
        ["train", "{corpus}", "--vocab", "500", "--pattern", "nosuchname", "-o", "{out}"],
        ["nosuchname"],
    ),
    "train-pattern-invalid-regex": (
        ["train", "{corpus}", "--vocab", "500", "--pattern", "((", "-o", "{out}"],
        ["(("],
    ),
    "train-duplicate-special": (
        ["train", "{corpus}", "--vocab", "500", "--special", "<|x|>", "--special", "<|x|>", "-o", "{out}"],
        ["<|x|>"],
    ),
    "train-empty-special": (["train", "{corpus}", "--vocab", "500", "--special", "", "-o", "{out}"], []),
    "train-output-dir-missing": (
        ["train", "{corpus}", "--vocab", "500", "-o", "{out_in_missing_dir}"],
        ["{out_in_missing_dir}"],
    ),
    "train-output-is-directory": (["train", "{corpus}", "--vocab", "500", "-o", "{dir}"], ["{dir}"]),
    "encode-missing-file": (["encode", "-t", "{tok}", "{missing}", "--out", "{out}"], ["{missing}"]),
    "encode-directory": (["encode", "-t", "{tok}", "{dir}", "--out", "{out}"], ["{dir}"]),
    "encode-not-utf8": (["encode", "-t", "{tok}", "{bad_utf8}", "--out", "{out}"], ["{bad_utf8}", "offset 5"]),
    "encode-not-utf8-stdout": (["encode", "-t", "{tok}", "{corpus}", "{bad_utf8}"], ["{bad_utf8}", "offset 5"]),
    "encode-not-utf8-to-file": (["encode", "-t", "{tok}", "{corpus}", "{bad_utf8}", "-o", "{out}.txt"], ["{bad_utf8}", "offset 5"]),
    "encode-not-utf8-to-npy": (["encode", "-t", "{tok}", "{corpus}", "{bad_utf8}", "-o", "{out}.npy"], ["{bad_utf8}", "offset 5"]),
    "encode-second-file-bad": (
        ["encode", "-t", "{tok}", "{corpus}", "{bad_utf8}", "--out", "{out}"],
        ["{bad_utf8}"],
    ),
    "encode-corrupt-tokenizer": (["encode", "-t", "{corrupt}", "{corpus}", "--out", "{out}"], ["{corrupt}"]),
    "encode-tokenizer-is-text": (["encode", "-t", "{corpus}", "{corpus}", "--out", "{out}"], ["{corpus}"]),
    "encode-missing-tokenizer": (["encode", "-t", "{missing}", "{corpus}", "--out", "{out}"], ["{missing}"]),
    "encode-output-dir-missing": (
        ["encode", "-t", "{tok}", "{corpus}", "--out", "{out_in_missing_dir}"],
        ["{out_in_missing_dir}"],
    ),
    "encode-no-tokenizer": (["encode", "{corpus}", "--out", "{out}"], ["-t"], True),
    "encode-out-is-a-file": (["encode", "-t", "{tok}", "{corpus}", "--out", "{empty}"], ["{empty}", "directory"]),
    "encode-val-fraction-without-out": (["encode", "-t", "{tok}", "{corpus}", "--val-fraction", "0.2"], ["-o DIR"], True),
    "encode-val-fraction-too-large": (
        ["encode", "-t", "{tok}", "{corpus}", "--val-fraction", "1", "--out", "{out}"],
        ["--val-fraction"],
    ),
    "encode-val-fraction-not-a-number": (
        ["encode", "-t", "{tok}", "{corpus}", "--val-fraction", "ten", "--out", "{out}"],
        ["ten"],
        True,
    ),
    "gpt-no-subcommand": (["gpt"], [], True),
    "gpt-train-no-data": (["gpt", "train", "-t", "{tok}"], ["--data"], True),
    "decode-not-ids-stdin": (["decode", "-t", "{tok}"], ["<stdin>", "offset 6"], False, "12 34 hello 56"),
    "decode-id-out-of-range": (["decode", "-t", "{tok}"], ["99999"], False, "1 2 99999"),
    "decode-negative-id": (["decode", "-t", "{tok}"], [], False, "1 -2 3"),
    "decode-corrupt-tokenizer": (["decode", "-t", "{corrupt}"], ["{corrupt}"], False, "1 2 3"),
    "decode-missing-file": (["decode", "-t", "{tok}", "{missing}"], ["{missing}"]),
    "decode-not-ids": (["decode", "-t", "{tok}", "{bad_utf8}"], ["{bad_utf8}", "byte offset 0 holds 'h'"]),
    "info-corrupt-tokenizer": (["info", "-t", "{corrupt}"], ["{corrupt}"]),
    "info-empty-tokenizer-file": (["info", "-t", "{empty}"], ["{empty}"]),
    "info-not-utf8": (["info", "-t", "{tok}", "{bad_utf8}"], ["{bad_utf8}", "offset 5"]),
    "info-missing-file": (["info", "-t", "{tok}", "{missing}"], ["{missing}"]),
    "no-command": ([], [], True),
    "unknown-command": (["tokenize", "{corpus}"], ["tokenize"], True),
}


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input(case, tmp_path, corpus, tok_path, corrupt_tok, bad_utf8):
    args, fragments, *rest = BAD_INPUT[case]
    usage = rest[0] if rest else False
    stdin = rest[1] if len(rest) > 1 else None
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "empty.bpe").write_bytes(b"")
    places = {
        "missing": tmp_path / "no-such-file.txt",
        "dir": tmp_path / "a-directory",
        "bad_utf8": bad_utf8,
        "corpus": corpus,
        "tok": tok_path,
        "corrupt": corrupt_tok,
        "empty": tmp_path / "empty.bpe",
        "out": tmp_path / "out.file",
        "out_in_missing_dir": tmp_path / "no-such-dir" / "out.file",
    }
    fill = lambda s: s.format(**{k: str(v) for k, v in places.items()})
    before = sorted(p.name for p in tmp_path.iterdir())

    result = run(*map(fill, args), cwd=tmp_path, stdin=stdin)

    # Output to stdout streams (memory stays bounded): the ids of the files
    # before a bad one are out already, as with `cat` or `iconv`. Output to a
    # file (-o) is atomic: no file at all.
    error = assert_clean_failure(result, usage=usage, stdout_ok=case in ("encode-not-utf8-stdout", "decode-id-out-of-range"))
    for fragment in fragments:
        assert fill(fragment) in error, f"{fill(fragment)!r} not in {error!r}"
    # No output, partial or otherwise, and no stray temporary files.
    assert not places["out"].exists()
    assert not Path(f"{places['out']}.txt").exists() and not Path(f"{places['out']}.npy").exists()
    assert not places["out_in_missing_dir"].parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert no_temp_files(tmp_path)
    # The inputs are untouched.
    assert places["dir"].is_dir() and list(places["dir"].iterdir()) == []


def test_failure_keeps_existing_output(tmp_path, corpus, bad_utf8):
    """A failed run leaves a previous output file exactly as it was."""
    out = tmp_path / "existing.out"
    out.write_bytes(b"previous contents\n")
    assert_clean_failure(run("train", corpus, bad_utf8, "--vocab", "500", "-o", out, cwd=tmp_path))
    assert out.read_bytes() == b"previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.out"]


def test_failed_encode_keeps_existing_dataset(tmp_path, corpus, tok_path, bad_utf8):
    """A failed `encode --out DIR` leaves the dataset already in DIR as it was
    (the new files are only renamed into place once all of them are complete)."""
    out = tmp_path / "ds"
    ok(run("encode", "-t", tok_path, corpus, "--out", out, cwd=tmp_path))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["meta.json", "train.bin", "val.bin"]
    # The bad file is the second: the first is encoded before the failure.
    assert_clean_failure(run("encode", "-t", tok_path, corpus, bad_utf8, "--out", out, cwd=tmp_path))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def _read_only_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(0o555)
    probe = directory / "probe"
    try:
        probe.write_bytes(b"")
    except PermissionError:
        return directory
    probe.unlink()
    directory.chmod(0o755)
    pytest.skip("chmod does not stop writes here (running as root?), so a read-only directory cannot be made")


@pytest.mark.parametrize("command", ["train", "encode"])
def test_read_only_output_directory(command, tmp_path, corpus, tok_path):
    directory = _read_only_dir(tmp_path)
    out = directory / "out.file"
    try:
        if command == "train":
            result = run("train", corpus, "--vocab", "500", "-o", out, cwd=tmp_path)
        else:
            result = run("encode", "-t", tok_path, corpus, "--out", out, cwd=tmp_path)  # out: a dataset directory
        error = assert_clean_failure(result)
        assert str(out) in error
        assert list(directory.iterdir()) == []
    finally:
        directory.chmod(0o755)


@pytest.mark.parametrize("command", ["train", "encode", "encode-dataset", "decode"])
def test_writes_refuse_devices_follow_links_and_honour_read_only(command, tmp_path, corpus, tok_path, tok):
    """Every command that writes: a device is never replaced, a symlink's
    target is written (the link stays), a read-only file needs --force."""
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(map(str, tok.encode("hello there"))))
    suffix = {"train": ".bpe", "encode": ".txt", "encode-dataset": "", "decode": ".out"}[command]

    def cli(out, *extra):
        args = {
            "train": ["train", corpus, "--vocab", "300", "-q"],
            "encode": ["encode", "-t", tok_path, corpus, "--format", "ids"],
            "encode-dataset": ["encode", "-t", tok_path, corpus, "-q"],
            "decode": ["decode", "-t", tok_path, ids],
        }[command]
        return run(*args, "-o", out, *extra, cwd=tmp_path)

    if command != "encode-dataset":
        # /dev/full is a device: refused up front, and still a device after.
        error = assert_clean_failure(cli("/dev/full"))
        assert "/dev/full" in error and "not a regular file" in error
        assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")
        target = tmp_path / f"real{suffix}"
        link = tmp_path / f"link{suffix}"
        link.symlink_to(target.name)
        ok(cli(link))
        assert link.is_symlink() and target.is_file() and target.stat().st_size > 0
        target.chmod(0o444)
    else:
        target = tmp_path / "ds"
        ok(cli(target))
        target = target / "train.bin"
        target.chmod(0o444)
    before = target.read_bytes()
    error = assert_clean_failure(cli(tmp_path / "ds" if command == "encode-dataset" else target))
    assert "read-only" in error and "--force" in error and ".tmp" not in error
    assert target.read_bytes() == before
    ok(cli(tmp_path / "ds" if command == "encode-dataset" else target, "--force"))
    assert no_temp_files(tmp_path)


def test_output_errors_never_name_temporary_files(tmp_path, corpus):
    for out in ("", "no-such-dir/x.bpe"):
        error = assert_clean_failure(run("train", corpus, "--vocab", "300", "-o", out, cwd=tmp_path))
        assert ".tmp" not in error and ".bpe-" not in error
    assert "empty" in assert_clean_failure(run("train", corpus, "--vocab", "300", "-o", "", cwd=tmp_path))
