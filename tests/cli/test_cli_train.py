"""`bpe train` on the command line, run the way a user runs it: in a child
process (``python -m bpe``; tests/helpers.py). What it writes is what the
Python API trains; --vocab, --pattern and --special in every form they take.
"""

from __future__ import annotations

import argparse
import json

import pytest

import bpe
from bpe.cli.arguments import vocab_sizes
from helpers import assert_clean_failure, corpus, ok, run, workdir  # noqa: F401  (fixtures)

CUSTOM_PATTERN = r"\s+|\w+|[^\s\w]+"


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
def test_vocab_size(text, value):
    """--vocab is a count: k and M are thousands and millions, Ki and Mi
    powers of 1024 (bpe/_util/sizes.py)."""
    assert vocab_sizes(text) == [value]


@pytest.mark.parametrize(
    "text",
    ["banana", "", "k", "Ki", "-5", "1e3", "1.5", "0.1Ki", "50kb", "50 thousand", "1.2.3k", "0x100", "kk1",
     "8k,,32k", "8k,"],
)
def test_vocab_size_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        vocab_sizes(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text, value", [("1.001k", 1001), ("1.005k", 1005), ("1.003M", 1_003_000)])
def test_vocab_size_exact_decimals(text, value):
    assert vocab_sizes(text) == [value]


@pytest.mark.parametrize("text, sizes", [("8k,32k,50k", [8000, 32000, 50000]), ("300,400,500", [300, 400, 500]),
                                         ("1,000,000", [1_000_000])])
def test_vocab_sizes_separated_by_commas(text, sizes):
    """Commas separate sizes, unless a part alone would be below 256 (then
    they group thousands)."""
    assert vocab_sizes(text) == sizes


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


def test_special_and_no_special_contradict(tmp_path, corpus):
    line = assert_clean_failure(run("train", corpus, "--vocab", "300", "--special", "<|x|>", "--no-special",
                                    "-o", tmp_path / "t.bpe", cwd=tmp_path), usage=True)
    assert line.startswith("bpe train: error: ") and "--special" in line and "--no-special" in line
    assert not (tmp_path / "t.bpe").exists()
