"""The `bpe` command line, run the way a user runs it: in a child process.

Most tests use ``python -m bpe`` (the interpreter running the tests); one runs
the installed ``bpe`` console script. Failures must end with a non-zero exit
status, one line on stderr, no traceback and no partial output file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bpe
from bpe.cli import parse_size

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
SHAKESPEARE = CORPORA / "tinyshakespeare.txt"
MULTILINGUAL = CORPORA / "multilingual_udhr.txt"

CORPUS_BYTES = 200_000  # enough text for 1Ki tokens
CUSTOM_PATTERN = r"\s+|\w+|[^\s\w]+"


def run(*args, cwd, stdin: str | None = None, exe: list[str] | None = None) -> subprocess.CompletedProcess:
    """Runs the CLI; stdout and stderr come back as str, decoded as UTF-8
    without newline translation (so a CRLF in the output stays a CRLF)."""
    command = (exe or [sys.executable, "-m", "bpe"]) + [os.fspath(a) for a in args]
    env = dict(os.environ, PYTHONUTF8="1")
    result = subprocess.run(
        command,
        cwd=cwd,
        input=None if stdin is None else stdin.encode("utf-8"),
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=120,
    )
    result.stdout = result.stdout.decode("utf-8")
    result.stderr = result.stderr.decode("utf-8")
    return result


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}; stderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def assert_clean_failure(result: subprocess.CompletedProcess, *, usage: bool = False, stdout_ok: bool = False) -> str:
    """A failure as a user should see it; returns the error line."""
    assert "Traceback" not in result.stderr, result.stderr
    if not stdout_ok:
        assert result.stdout == "", "a failed command printed output"
    lines = result.stderr.splitlines()
    if usage:
        # A command line that cannot be understood: one line under the
        # command's name, pointing to its --help; exit status 2.
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
        assert re.match(r"bpe( \w+)*: error: .* \(see `bpe( \w+)* --help`\)$", lines[0]), lines[0]
    else:
        assert result.returncode != 0
        assert result.returncode == 1, result.stderr
        assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
        assert lines[0].startswith("bpe: error: ")
    return lines[-1]


def no_temp_files(directory: Path) -> bool:
    return not list(directory.glob(".bpe-*.tmp"))


# -- fixtures ---------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def corpus(workdir) -> Path:
    text = SHAKESPEARE.read_bytes()[:CORPUS_BYTES].decode("utf-8", errors="ignore")
    path = workdir / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.fixture(scope="module")
def tok_path(workdir, corpus) -> Path:
    """A 500-token tokenizer trained once through the CLI."""
    path = workdir / "tok.bpe"
    ok(run("train", corpus, "--vocab", "500", "-o", path, "-q", cwd=workdir))
    return path


@pytest.fixture(scope="module")
def tok(tok_path) -> bpe.Tokenizer:
    return bpe.Tokenizer.load(tok_path)


@pytest.fixture(scope="module")
def sample(workdir) -> Path:
    """A UTF-8 file with text the tokenizer did not see, including non-Latin
    scripts, emoji, CRLF and the special token's text."""
    shakespeare = SHAKESPEARE.read_bytes()[CORPUS_BYTES : CORPUS_BYTES + 5000].decode("utf-8", errors="ignore")
    multilingual = MULTILINGUAL.read_text(encoding="utf-8")
    middle = len(multilingual) // 2
    text = (
        shakespeare
        + multilingual[middle : middle + 2000]
        + "\r\nemoji 🙂👍🏽 and <|endoftext|> as text\n\n  trailing spaces   "
    )
    path = workdir / "sample.txt"
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def bad_utf8(workdir) -> Path:
    path = workdir / "latin1.txt"
    path.write_bytes(b"hello\xff\xfeworld")
    return path


@pytest.fixture(scope="module")
def corrupt_tok(workdir, tok_path) -> Path:
    """The tokenizer file with one digit of one merge line changed."""
    lines = tok_path.read_text(encoding="utf-8").split("\n")
    i = next(i for i, l in enumerate(lines) if l.startswith("merges ")) + 10
    lines[i] = str((int(lines[i][0]) + 1) % 10) + lines[i][1:]
    path = workdir / "corrupt.bpe"
    path.write_text("\n".join(lines), encoding="utf-8", newline="")
    return path


# -- train -------------------------------------------------------------------


def test_train(tmp_path, corpus):
    out = tmp_path / "out.bpe"
    result = ok(run("train", corpus, "--vocab", "500", "-o", out, cwd=tmp_path))
    assert result.stdout == ""  # the summary goes to stderr
    assert str(out) in result.stderr and "500" in result.stderr

    tok = bpe.Tokenizer.load(out)
    assert tok.n_vocab == 500
    assert tok.special_tokens == {"<|endoftext|>": 499}
    assert tok.pattern == bpe.GPT4_PATTERN
    # The CLI trains exactly what the Python API trains.
    assert tok == bpe.Tokenizer.train(corpus, 500, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bpe"]


def test_train_default_output_name(tmp_path, corpus):
    ok(run("train", corpus, "--vocab", "300", "-q", cwd=tmp_path))
    assert bpe.Tokenizer.load(tmp_path / "tokenizer.bpe").n_vocab == 300


def test_train_quiet_is_silent(tmp_path, corpus):
    result = ok(run("train", corpus, "--vocab", "300", "-o", tmp_path / "q.bpe", "-q", cwd=tmp_path))
    assert result.stdout == "" and result.stderr == ""


def test_train_several_files(tmp_path, corpus):
    text = corpus.read_text(encoding="utf-8")
    half = len(text) // 2
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(text[:half], encoding="utf-8", newline="")
    b.write_text(text[half:], encoding="utf-8", newline="")
    ok(run("train", a, b, "--vocab", "400", "-o", tmp_path / "ab.bpe", "-q", cwd=tmp_path))
    expected = bpe.Tokenizer.train([a, b], 400, progress=False)
    assert bpe.Tokenizer.load(tmp_path / "ab.bpe") == expected


@pytest.mark.parametrize("vocab, n", [("1k", 1000), ("1Ki", 1024), ("0.5Ki", 512), ("600", 600)])
def test_train_vocab_forms(vocab, n, tmp_path, corpus):
    out = tmp_path / "v.bpe"
    ok(run("train", corpus, "--vocab", vocab, "-o", out, "-q", cwd=tmp_path))
    tok = bpe.Tokenizer.load(out)
    assert tok.n_vocab == n
    assert len(tok.merges) == n - 256 - 1


@pytest.mark.parametrize(
    "text, value",
    [
        ("50k", 50 * 1000),
        ("50000", 50000),
        ("32Ki", 32 * 1024),
        ("1.5k", 1500),
        ("1K", 1000),
        ("2M", 2 * 1000**2),
        ("1Mi", 1024**2),
        ("0.5Ki", 1024 // 2),
        ("50_000", 50000),
        ("50,000", 50000),
        (" 50k ", 50000),
        ("256", 256),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize(
    "text",
    ["banana", "", "k", "Ki", "-5", "1e3", "1.5", "0.1Ki", "50kb", "50 thousand", "1.2.3k", "0x100", "kk1"],
)
def test_parse_size_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse_size(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text, value", [("1.001k", 1001), ("1.005k", 1005), ("1.003M", 1_003_000)])
def test_parse_size_exact_decimals(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize(
    "pattern, expected",
    [("gpt2", bpe.GPT2_PATTERN), ("gpt4o", bpe.GPT4O_PATTERN), ("cl100k", bpe.GPT4_PATTERN), (CUSTOM_PATTERN, CUSTOM_PATTERN)],
    ids=["gpt2", "gpt4o", "cl100k", "custom"],
)
def test_train_pattern(pattern, expected, tmp_path, corpus):
    out = tmp_path / "p.bpe"
    ok(run("train", corpus, "--vocab", "400", "--pattern", pattern, "-o", out, "-q", cwd=tmp_path))
    assert bpe.Tokenizer.load(out).pattern == expected
    assert f"pattern {json.dumps(expected)}\n" in out.read_text(encoding="utf-8")
    assert bpe.Tokenizer.load(out) == bpe.Tokenizer.train(corpus, 400, pattern=expected, progress=False)


def test_train_special_tokens(tmp_path, corpus):
    out = tmp_path / "s.bpe"
    ok(run("train", corpus, "--vocab", "500", "--special", "<|a|>", "--special", "<|b b|>", "-o", out, "-q",
           cwd=tmp_path))
    tok = bpe.Tokenizer.load(out)
    assert list(tok.special_tokens.items()) == [("<|a|>", 498), ("<|b b|>", 499)]
    assert tok.n_vocab == 500
    assert tok.encode("x<|b b|>", allowed_special="all")[-1] == 499


def test_train_no_special(tmp_path, corpus):
    out = tmp_path / "n.bpe"
    ok(run("train", corpus, "--vocab", "500", "--no-special", "-o", out, "-q", cwd=tmp_path))
    tok = bpe.Tokenizer.load(out)
    assert tok.special_tokens == {}
    assert tok.n_vocab == 500
    assert len(tok.merges) == 500 - 256


# -- encode / decode / info ----------------------------------------------------


def parse_ids(line: str) -> list[int]:
    return [int(x) for x in line.split()]


def test_encode_to_stdout(workdir, tok_path, tok, sample):
    result = ok(run("encode", "-t", tok_path, sample, "--special-as-text", cwd=workdir))
    lines = result.stdout.split("\n")
    assert lines[-1] == "" and len(lines) == 2  # one line of ids per file
    ids = parse_ids(lines[0])
    text = sample.read_bytes().decode("utf-8")
    assert tok.decode(ids) == text
    # --special-as-text: special-token text in a file is ordinary text.
    assert tok.special_tokens["<|endoftext|>"] not in ids
    assert ids == tok.encode_ordinary(text)


def test_special_token_text_is_an_error_by_default(workdir, tok_path, tok, sample):
    """As in Python's `encode` (tiktoken's rule): special-token text in the
    input is an error naming the file and offset, and the two flags that
    decide what to do with it; the same for the dataset path and `info`."""
    text = sample.read_bytes()
    at = text.index(b"<|endoftext|>")
    line = text[:at].count(b"\n") + 1
    for args in (["encode"], ["encode", "-o", workdir / "refused-ds"], ["info"]):
        error = assert_clean_failure(run(*args, "-t", tok_path, sample, cwd=workdir), stdout_ok=True)
        assert f"{sample} holds the special token \"<|endoftext|>\" at byte offset {at} (line {line})" in error
        assert "--special-as-text" in error and "--allow-special" in error
    assert not (workdir / "refused-ds").exists()
    error = assert_clean_failure(run("encode", "-t", tok_path, "--text", "a <|endoftext|> b", cwd=workdir))
    assert "--special-as-text" in error and "--allow-special" in error
    # Python says the same.
    with pytest.raises(ValueError, match="disallowed"):
        tok.encode(text.decode("utf-8"))
    both = run("encode", "-t", tok_path, sample, "--allow-special", "--special-as-text", cwd=workdir)
    assert "not allowed with argument" in assert_clean_failure(both, usage=True)


def test_encode_several_files(workdir, tok_path, tok, sample, corpus):
    result = ok(run("encode", "-t", tok_path, sample, corpus, "--special-as-text", cwd=workdir))
    lines = result.stdout.split("\n")
    assert len(lines) == 3 and lines[-1] == ""
    assert tok.decode(parse_ids(lines[0])) == sample.read_bytes().decode("utf-8")
    assert tok.decode(parse_ids(lines[1])) == corpus.read_bytes().decode("utf-8")


def test_encode_allow_special(workdir, tok_path, tok, sample):
    result = ok(run("encode", "-t", tok_path, sample, "--allow-special", cwd=workdir))
    ids = parse_ids(result.stdout)
    text = sample.read_bytes().decode("utf-8")
    assert ids == tok.encode(text, allowed_special="all")
    assert tok.special_tokens["<|endoftext|>"] in ids
    assert tok.decode(ids) == text


def read_bin(path: Path, width: int) -> list[int]:
    raw = path.read_bytes()
    return [int.from_bytes(raw[i : i + width], "little") for i in range(0, len(raw), width)]


def test_encode_out_dir_writes_a_dataset(tmp_path, tok_path, tok, sample, corpus):
    """--out DIR: train.bin / val.bin (flat little-endian uint16 here) and
    meta.json; nothing on stdout; <|endoftext|> between the files."""
    out = tmp_path / "ds"
    result = ok(run("encode", "-t", tok_path, sample, corpus, "--out", out, "--val-fraction", "0.2",
                    "--special-as-text", cwd=tmp_path))
    assert result.stdout == ""
    assert str(out) in result.stderr and "train.bin" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["dtype"] == "uint16" and meta["split"]["val_fraction"] == 0.2
    eot = tok.special_tokens["<|endoftext|>"]
    texts = {"train": [], "val": []}
    for f in (sample, corpus):
        raw = f.read_bytes()
        # Each file is cut at the first line start after 80% of its bytes.
        cut = raw.index(b"\n", int(round(len(raw) * 0.8))) + 1
        texts["train"].append(raw[:cut].decode("utf-8"))
        texts["val"].append(raw[cut:].decode("utf-8"))
    for split, parts in texts.items():
        ids = read_bin(out / f"{split}.bin", 2)
        expected = tok.encode_ordinary(parts[0]) + [eot] + tok.encode_ordinary(parts[1])
        assert ids == expected, split
        assert meta["splits"][split]["tokens"] == len(ids)
        assert meta["splits"][split]["bytes"] == sum(len(p.encode("utf-8")) for p in parts)
    assert no_temp_files(out) and no_temp_files(tmp_path)
    # Writing again over an existing dataset replaces it.
    # -o is --out; meta.json names the sources and the tokenizer as given.
    ok(run("encode", "-t", tok_path.name, corpus.name, "-o", out, cwd=corpus.parent))
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["splits"]["train"]["documents"] == 1 and meta["split"]["val_fraction"] == 0.1
    assert meta["sources"] == [corpus.name] and meta["tokenizer"]["file"] == tok_path.name


def test_decode_stdin(workdir, tok_path, tok, sample):
    text = sample.read_bytes().decode("utf-8")
    ids = ok(run("encode", "-t", tok_path, sample, "--special-as-text", cwd=workdir)).stdout
    result = ok(run("decode", "-t", tok_path, cwd=workdir, stdin=ids))
    assert result.stdout == text
    # "-" means stdin too; ids may be spread over lines.
    spread = "\n".join(ids.split())
    assert ok(run("decode", "-t", tok_path, "-", cwd=workdir, stdin=spread)).stdout == text


def test_decode_file(tmp_path, tok_path, sample):
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(ok(run("encode", "-t", tok_path, sample, "--special-as-text", cwd=tmp_path)).stdout, encoding="utf-8")
    result = ok(run("decode", "-t", tok_path, ids_file, cwd=tmp_path))
    assert result.stdout == sample.read_bytes().decode("utf-8")


def test_decode_empty_input(workdir, tok_path):
    assert ok(run("decode", "-t", tok_path, cwd=workdir, stdin="")).stdout == ""


def test_info(workdir, tok_path, tok):
    out = ok(run("info", "-t", tok_path, cwd=workdir)).stdout
    m = re.search(r"vocab size:\s*(\d+)", out)
    assert m and int(m.group(1)) == tok.n_vocab == 500
    assert "<|endoftext|>" in out
    assert "bytes per token" not in out


def test_info_with_file(workdir, tok_path, tok, sample):
    out = ok(run("info", "-t", tok_path, sample, "--special-as-text", cwd=workdir)).stdout
    m = re.search(r"vocab size:\s*(\d+)", out)
    assert m and int(m.group(1)) == tok.n_vocab
    m = re.search(r"(\d+(?:\.\d+)?) bytes per token", out)
    assert m, out
    text = sample.read_bytes().decode("utf-8")
    expected = len(text.encode("utf-8")) / len(tok.encode_ordinary(text))
    assert float(m.group(1)) == pytest.approx(expected, abs=0.0006)
    assert 1.0 < float(m.group(1)) < 10.0


def _console_script() -> str | None:
    here = shutil.which("bpe", path=os.path.dirname(sys.executable))
    return here or shutil.which("bpe")


def test_console_script(tmp_path, corpus, sample):
    script = _console_script()
    if script is None:
        pytest.skip("the `bpe` console script is not on PATH (package not installed with pip?)")
    out = tmp_path / "script.bpe"
    ok(run("train", corpus, "--vocab", "350", "-o", out, "-q", cwd=tmp_path, exe=[script]))
    tok = bpe.Tokenizer.load(out)
    assert tok == bpe.Tokenizer.train(corpus, 350, progress=False)

    via_script = ok(run("encode", "-t", out, sample, "--allow-special", cwd=tmp_path, exe=[script])).stdout
    via_module = ok(run("encode", "-t", out, sample, "--allow-special", cwd=tmp_path)).stdout
    assert via_script == via_module
    decoded = ok(run("decode", "-t", out, cwd=tmp_path, exe=[script], stdin=via_script)).stdout
    assert decoded == sample.read_bytes().decode("utf-8")

    failed = run("encode", "-t", out, tmp_path / "missing.txt", cwd=tmp_path, exe=[script])
    assert "missing.txt" in assert_clean_failure(failed)


def test_help(workdir):
    result = ok(run("--help", cwd=workdir))
    for command in ("train", "encode", "decode", "info", "gpt"):
        assert command in result.stdout


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


def test_decode_negative_id_message_names_range(workdir, tok_path, tok):
    """Both ends of the range are reported the same way (negative ids get 0..n_vocab-1)."""
    low = assert_clean_failure(run("decode", "-t", tok_path, cwd=workdir, stdin="-1"))
    assert f"0..{tok.n_vocab - 1}" in low


def test_decode_too_large_message_names_largest_id(workdir, tok_path, tok):
    high = assert_clean_failure(run("decode", "-t", tok_path, cwd=workdir, stdin=str(tok.n_vocab)))
    assert f"0..{tok.n_vocab - 1}" in high
    assert f"0..{tok.n_vocab}" not in high.replace(f"0..{tok.n_vocab - 1}", "")


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


# -- issue 34: round trips, streaming, one set of flags, any tokenizer ------------


def test_round_trip_through_a_dataset(tmp_path, tok_path, tok, sample, corpus):
    """`decode` reads the .bin files that `encode -o DIR` writes (its dtype
    from meta.json beside it, or --dtype), and .npy, json and id text."""
    ds = tmp_path / "ds"
    ok(run("encode", "-t", tok_path, sample, corpus, "-o", ds, "--special-as-text", "-q", cwd=tmp_path))
    eot = "<|endoftext|>"
    texts = [f.read_bytes() for f in (sample, corpus)]
    cuts = [t.index(b"\n", int(round(len(t) * 0.9))) + 1 for t in texts]
    want = {
        "train": texts[0][: cuts[0]].decode() + eot + texts[1][: cuts[1]].decode(),
        "val": texts[0][cuts[0] :].decode() + eot + texts[1][cuts[1] :].decode(),
    }
    for split in ("train", "val"):
        assert ok(run("decode", "-t", tok_path, ds / f"{split}.bin", cwd=tmp_path)).stdout == want[split]
    # Without meta.json, --dtype says how wide the ids are.
    lone = tmp_path / "lone.bin"
    shutil.copy(ds / "train.bin", lone)
    assert "--dtype" in assert_clean_failure(run("decode", "-t", tok_path, lone, cwd=tmp_path))
    assert ok(run("decode", "-t", tok_path, lone, "--dtype", "uint16", cwd=tmp_path)).stdout == want["train"]
    # The wrong width is caught when the length does not divide.
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x00\x00\x02\x00")  # id 1, then half an id
    assert "multiple of 4 bytes" in assert_clean_failure(
        run("decode", "-t", tok_path, odd, "--dtype", "uint32", cwd=tmp_path), stdout_ok=True)

    # .npy, json and ids: decode gives back the files, one after the other
    # (.npy has <|endoftext|> between them, as a dataset has).
    both = texts[0].decode() + texts[1].decode()
    for name, expected in (("ids.npy", texts[0].decode() + eot + texts[1].decode()),
                           ("ids.jsonl", both), ("ids.txt", both)):
        out = tmp_path / name
        ok(run("encode", "-t", tok_path, sample, corpus, "-o", out, "--special-as-text", cwd=tmp_path))
        assert ok(run("decode", "-t", tok_path, out, cwd=tmp_path)).stdout == expected, name
    np = pytest.importorskip("numpy")
    array = np.load(tmp_path / "ids.npy")
    assert array.dtype == np.uint16
    assert array.tolist() == tok.encode_ordinary(texts[0].decode()) + [tok.special_tokens[eot]] + tok.encode_ordinary(texts[1].decode())
    lines = (tmp_path / "ids.jsonl").read_text().splitlines()
    assert [json.loads(l) for l in lines] == [tok.encode_ordinary(t.decode()) for t in texts]


def test_decode_errors_and_bytes(tmp_path, tok_path, tok):
    """Ids cut mid-character: U+FFFD by default (as `Tokenizer.decode`), an
    error naming the id with --errors strict, the raw bytes with --bytes."""
    ids = tok.encode("héllo wörld")
    e_acute = next(k for k, i in enumerate(ids) if b"\xc3" in tok.token_bytes(i))
    cut = ids[:e_acute] + [0xC3] + ids[e_acute + 1 :] if tok.token_bytes(ids[e_acute]) != b"\xc3" else ids[:e_acute + 1] + ids[e_acute + 2 :]
    text = " ".join(map(str, cut))
    assert ok(run("decode", "-t", tok_path, cwd=tmp_path, stdin=text)).stdout == tok.decode(cut)
    assert "\ufffd" in tok.decode(cut)
    error = assert_clean_failure(run("decode", "-t", tok_path, "--errors", "strict", cwd=tmp_path, stdin=text),
                                 stdout_ok=True)
    assert "not UTF-8" in error and "id number" in error and "--errors replace" in error
    raw = subprocess.run([sys.executable, "-m", "bpe", "decode", "-t", tok_path, "--bytes"], input=text.encode(),
                         capture_output=True, cwd=tmp_path, timeout=60)
    assert raw.returncode == 0 and raw.stdout == tok.decode_bytes(cut)


def _peak_rss_mb(args: list, *, stdout=subprocess.DEVNULL, stdin=None) -> tuple[int, float]:
    """Runs the CLI in a child of a fresh Python and returns (exit status,
    the child's peak resident memory in MB): ru_maxrss of RUSAGE_CHILDREN in
    a process whose only child it is."""
    probe = (
        "import resource, subprocess, sys\n"
        "rc = subprocess.run(sys.argv[1:], stdin=sys.stdin, stdout=sys.stdout).returncode\n"
        "sys.stderr.write(f'{rc} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "bpe", *map(os.fspath, args)],
                            stdout=stdout, stdin=stdin or subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    rc, kib = result.stderr.decode().splitlines()[-1].split()
    return int(rc), int(kib) / 1024


#: The peak memory a streamed command may use, whatever the input size. The
#: measured peak on 200 MB (README, "Limits"): about 190 MB with GPT-2's
#: vocabulary, of which ~75 MB are Python, the tokenizer and its tables, and
#: 64 MiB the chunk cache at its cap; it was 3.7 GB before streaming.
STREAM_MEMORY_MB = 400


def test_encode_decode_info_stream_in_bounded_memory(tmp_path, tok_path, tok):
    """A 200 MB input through encode (stdout, -o .npy), decode (id text,
    .npy) and info: peak memory stays under a cap that does not grow with
    the input, and the round trips give back the input byte for byte."""
    piece = SHAKESPEARE.read_bytes() + MULTILINGUAL.read_bytes()
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        for _ in range(200_000_000 // len(piece) + 1):
            f.write(piece)
    size = big.stat().st_size
    assert size >= 200_000_000

    ids_txt = tmp_path / "big.ids"
    with open(ids_txt, "wb") as out:
        rc, mb = _peak_rss_mb(["encode", "-t", tok_path, big, "-q"], stdout=out)
    assert rc == 0 and mb < STREAM_MEMORY_MB, f"encode to stdout: exit {rc}, peak {mb:.0f} MB"
    rc, mb = _peak_rss_mb(["encode", "-t", tok_path, big, "-o", tmp_path / "big.npy", "-q"])
    assert rc == 0 and mb < STREAM_MEMORY_MB, f"encode -o .npy: exit {rc}, peak {mb:.0f} MB"
    for source in (ids_txt, tmp_path / "big.npy"):
        back = tmp_path / "back.txt"
        with open(back, "wb") as out:
            rc, mb = _peak_rss_mb(["decode", "-t", tok_path, source], stdout=out)
        assert rc == 0 and mb < STREAM_MEMORY_MB, f"decode {source.name}: exit {rc}, peak {mb:.0f} MB"
        assert back.stat().st_size == size and _same_file(back, big), source.name
        back.unlink()
    with open(big, "rb") as stdin:  # stdin too
        rc, mb = _peak_rss_mb(["info", "-t", tok_path, "-"], stdin=stdin)
    assert rc == 0 and mb < STREAM_MEMORY_MB, f"info: exit {rc}, peak {mb:.0f} MB"


def _same_file(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 22), fb.read(1 << 22)
            if x != y:
                return False
            if not x:
                return True


def test_stdin_and_text_everywhere(tmp_path, tok_path, tok, corpus):
    """`-` is standard input for every command that takes FILE; `--text`
    encodes a string given on the command line."""
    text = corpus.read_text(encoding="utf-8")[:20_000]
    ids = tok.encode(text)
    assert parse_ids(ok(run("encode", "-t", tok_path, "-", cwd=tmp_path, stdin=text)).stdout) == ids
    assert json.loads(ok(run("encode", "-t", tok_path, "--text", "hi there", "--format", "json", cwd=tmp_path)).stdout) \
        == tok.encode("hi there")
    assert ok(run("decode", "-t", tok_path, "-", cwd=tmp_path, stdin=" ".join(map(str, ids)))).stdout == text
    info = ok(run("info", "-t", tok_path, "-", cwd=tmp_path, stdin=text)).stdout
    assert f"<stdin>: {len(ids):,} tokens" in info
    out = tmp_path / "from-stdin.bpe"
    ok(run("train", "-", "--vocab", "300", "-o", out, "-q", cwd=tmp_path, stdin=text))
    assert bpe.Tokenizer.load(out) == bpe.Tokenizer.train(text, 300, progress=False)
    # Errors in what came on stdin name <stdin>, never a temporary file.
    error = assert_clean_failure(run("train", "-", "--vocab", "300", "-o", out, cwd=tmp_path, stdin="a\0b"))
    assert "<stdin>" in error and "tmp" not in error
    # Arguments that do not go together are usage errors (exit status 2).
    error = assert_clean_failure(run("encode", "-t", tok_path, "-", "-", cwd=tmp_path, stdin="x"), usage=True)
    assert "once" in error
    usage = assert_clean_failure(run("encode", "-t", tok_path, "--text", "x", corpus, cwd=tmp_path), usage=True)
    assert "not both" in usage


def test_output_flag_on_every_command_that_writes(tmp_path, tok_path, tok, corpus):
    """-o/--output everywhere; --out stays as encode's alias."""
    ok(run("train", corpus, "--vocab", "300", "--output", tmp_path / "t.bpe", "-q", cwd=tmp_path))
    for flag in ("-o", "--output", "--out"):
        out = tmp_path / f"ids{flag}.txt"
        ok(run("encode", "-t", tok_path, corpus, flag, out, cwd=tmp_path))
        assert parse_ids(out.read_text()) == tok.encode(corpus.read_text(encoding="utf-8"))
        back = tmp_path / f"back{flag}.txt"
        ok(run("decode", "-t", tok_path, out, "-o" if flag == "--out" else flag, back, cwd=tmp_path))
        assert back.read_bytes() == corpus.read_bytes()


def test_version_and_help_on_every_argument(workdir):
    assert re.fullmatch(r"bpe \d+\.\d+\.\d+\S* \(Python 3\.\d+\.\d+\S*\)\n",
                        ok(run("--version", cwd=workdir)).stdout)
    from bpe.cli import build_parser

    def walk(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, p in action.choices.items():
                    yield from walk(p, f"{name} {sub}")
            elif not isinstance(action, argparse._HelpAction):
                yield name, action

    missing = [f"{name} {a.option_strings or a.dest}" for name, a in walk(build_parser(), "bpe") if not a.help]
    assert missing == []


@pytest.mark.parametrize("args, command, fragment", [
    (["encode", "-o", "x"], "bpe encode", "-t/--tokenizer"),
    (["encode", "-t", "t.bpe", "f.txt", "--bogus"], "bpe encode", "--bogus"),
    (["decode", "-t", "t.bpe", "--errors", "ignore"], "bpe decode", "invalid choice: 'ignore'"),
    (["info"], "bpe info", "-t/--tokenizer"),
    (["train", "f.txt"], "bpe train", "--vocab"),
    (["gpt", "train", "-t", "t"], "bpe gpt train", "--data"),
    (["tokenize"], "bpe", "invalid choice: 'tokenize'"),
])
def test_usage_errors_are_one_line_under_the_command(args, command, fragment, workdir):
    line = assert_clean_failure(run(*args, cwd=workdir), usage=True)
    assert line.startswith(f"{command}: error: ") and fragment in line and line.endswith(f"(see `{command} --help`)")


def test_special_and_no_special_contradict(tmp_path, corpus):
    line = assert_clean_failure(run("train", corpus, "--vocab", "300", "--special", "<|x|>", "--no-special",
                                    "-o", tmp_path / "t.bpe", cwd=tmp_path), usage=True)
    assert line.startswith("bpe train: error: ") and "--special" in line and "--no-special" in line
    assert not (tmp_path / "t.bpe").exists()


def test_tokenizer_by_name_tiktoken_file_and_tokenizer_json(tmp_path, tok_path, tok, corpus):
    """-t takes a name, a .tiktoken file or a tokenizer.json besides a .bpe:
    the ids are those of the Python API's loaders (and tiktoken's)."""
    tiktoken = pytest.importorskip("tiktoken")
    text = corpus.read_text(encoding="utf-8")[:5000]
    enc = tiktoken.get_encoding("cl100k_base")
    want = enc.encode(text)
    licence = CORPORA / "LICENSE-Unicode.txt"
    for spec in ("cl100k", "cl100k_base"):
        assert parse_ids(ok(run("encode", "-t", spec, licence, cwd=tmp_path)).stdout) \
            == enc.encode(licence.read_text(encoding="utf-8"))
    cl100k = bpe.Tokenizer.from_tiktoken(enc)
    # A .tiktoken rank file named after its encoding: pattern and specials known.
    ranks = tmp_path / "cl100k_base.tiktoken"
    cl100k.save_tiktoken(ranks)
    assert parse_ids(ok(run("encode", "-t", ranks, "-", cwd=tmp_path, stdin=text)).stdout) == want
    info = ok(run("info", "-t", ranks, cwd=tmp_path)).stdout
    assert "<|endofprompt|> = 100276" in info and "gpt4" in info
    # A rank file of unknown origin: no pattern to guess.
    ours = tmp_path / "ours.tiktoken"
    tok.save_tiktoken(ours)
    assert "pattern" in assert_clean_failure(run("info", "-t", ours, cwd=tmp_path))
    # A tokenizer.json (ours, exported).
    hf = tmp_path / "tokenizer.json"
    tok.save_huggingface(hf)
    assert parse_ids(ok(run("encode", "-t", hf, "-", cwd=tmp_path, stdin=text)).stdout) == tok.encode(text)
    # Not a file, not a name.
    line = assert_clean_failure(run("info", "-t", "cl100", cwd=tmp_path))
    assert "cl100" in line and "cl100k" in line and "o200k" in line


def test_known_encodings_match_tiktoken():
    """bpe/named.py's table of OpenAI's encodings (used for .tiktoken files)
    says what tiktoken says."""
    tiktoken = pytest.importorskip("tiktoken")
    from bpe.named import KNOWN

    for name, (pattern, specials, n_ranks) in KNOWN.items():
        enc = tiktoken.get_encoding(name)
        assert (pattern, specials, n_ranks) == (enc._pat_str, enc._special_tokens, len(enc._mergeable_ranks)), name


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
