"""The `bpe` command line, run the way a user runs it: in a child process.

Most tests use ``python -m bpe`` (the interpreter running the tests); one runs
the installed ``bpe`` console script. Failures must end with a non-zero exit
status, one line on stderr, no traceback and no partial output file.

This file: what every command shares (the console script, --help and
--version, usage errors, -t's tokenizer by file or name). Each command has
its own file beside it (test_cli_train.py, test_cli_encode.py), and so do the
failures (test_cli_failures.py); the shared helpers are in tests/helpers.py.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys

import pytest

import bpe
from helpers import CORPORA, assert_clean_failure, ok, parse_ids, run
from helpers import corpus, sample, tok, tok_path, workdir  # noqa: F401  (fixtures)


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
