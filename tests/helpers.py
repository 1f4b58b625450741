"""Helpers that several test files share (``from helpers import ...``, as
``from conftest import ...``: this folder is on ``sys.path`` when pytest runs).

- running the ``bpe`` command in a child process, and what its success and its
  failures must look like (``run``, ``ok``, ``assert_clean_failure``);
- a child Python and its peak memory (``python_child``, ``peak_rss_mb``);
- ``.bpe`` files edited behind the checksum (``with_checksum``, ``body_lines``);
- the fixtures of the command-line tests (tests/cli/): a tokenizer trained once
  per test module through the command line, and files to give it. A test file
  uses them by importing them (``from helpers import corpus, tok_path, ...``);
  each importing module gets its own (module scope).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bpe
from conftest import CORPORA, ROOT

SHAKESPEARE = CORPORA / "tinyshakespeare.txt"
MULTILINGUAL = CORPORA / "multilingual_udhr.txt"

# -- the command line, in a child process -------------------------------------------


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


def cli(*args, cwd, stdin: str = "") -> subprocess.CompletedProcess:
    """Runs the CLI with text output (newlines translated) and ``stdin`` as its input."""
    env = dict(os.environ, PYTHONUTF8="1")
    return subprocess.run(
        [sys.executable, "-m", "bpe", *map(str, args)],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """A failed `bpe` run: exit status 1, one `bpe: error:` line, no traceback
    (what it printed on stdout before is not looked at)."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: error: "), result.stderr
    return lines[0]


def no_temp_files(directory: Path) -> bool:
    return not list(directory.glob(".bpe-*.tmp"))


def parse_ids(line: str) -> list[int]:
    return [int(x) for x in line.split()]


# -- a child Python ------------------------------------------------------------------


def python_child(script: str, *args, **kwargs) -> subprocess.Popen:
    """A child Python running ``script`` (with bpe importable from anywhere)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUTF8="1")
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        **kwargs,
    )


def peak_rss_mb(args: list, *, stdout=subprocess.DEVNULL, stdin=None) -> tuple[int, float]:
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


# -- .bpe files edited behind the checksum ---------------------------------------------


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


# -- the fixtures of the command-line tests ----------------------------------------------

CORPUS_BYTES = 200_000  # enough text for 1Ki tokens


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
