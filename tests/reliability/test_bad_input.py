"""Reliability (docs/reliability.md), 2. Bad input: each kind of bad
input gives a specific error, in Python and on the command line. (A line too
long to hold is tests/reliability/test_long_lines.py's.)

Covered elsewhere (referenced, not repeated):
  vocab_size below 256 + specials ....... tests/tokenizer/test_train.py::test_bad_arguments,
                                          tests/cli/test_cli_failures.py::test_bad_input
  duplicate special tokens (train) ...... tests/tokenizer/test_train.py::test_bad_arguments,
                                          tests/cli/test_cli_failures.py::test_bad_input
  missing file, unwritable output ....... tests/cli/test_cli_failures.py::test_bad_input,
                                          test_read_only_output_directory
  vocab_size beyond the corpus (API) .... tests/tokenizer/test_train.py::test_small_corpus_stops_early_with_warning
  out-of-range and negative ids ......... tests/tokenizer/test_encode.py::test_decode_bad_ids,
                                          tests/cli/test_cli_failures.py (decode-*)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import bpe
from bpe import Tokenizer
from bpe._util.vocab import MAX_VOCAB_SIZE
from helpers import SHAKESPEARE, cli, one_error_line

TEXT = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
SPECIALS = ["<|endoftext|>", "<|fim|>"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXT, 400, special_tokens=SPECIALS, progress=False)


def test_not_utf8_names_file_offset_and_line(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"first line\nsecond caf\xe9\n")
    expected = rf"{re.escape(str(bad))} is not valid UTF-8 at byte offset 21 \(line 2\)"
    with pytest.raises(ValueError, match=expected):
        Tokenizer.train(bad, 300)
    assert re.search(expected, one_error_line(cli("train", bad, "--vocab", "300", "-o", tmp_path / "o.bpe",
                                                  cwd=tmp_path)))
    tok_path = tmp_path / "t.bpe"
    Tokenizer.train(TEXT[:20_000], 300, progress=False).save(tok_path)
    for args in (["encode", "-t", tok_path, bad], ["encode", "-t", tok_path, bad, "--out", tmp_path / "ds"],
                 ["info", "-t", tok_path, bad]):
        assert re.search(r"not valid UTF-8 at byte offset 21 \(line 2\)", one_error_line(cli(*args, cwd=tmp_path)))
    assert not (tmp_path / "o.bpe").exists() and not (tmp_path / "ds").exists()


def test_binary_file_is_refused(tmp_path):
    # A real binary (this Python interpreter) and a small one with a NUL byte.
    small = tmp_path / "image.png"
    small.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    for path in (Path(sys.executable).resolve(), small):
        with pytest.raises(ValueError, match=r"looks like a binary file, not text: it has a NUL byte at byte offset \d+"):
            Tokenizer.train(path, 300)
        line = one_error_line(cli("train", path, "--vocab", "300", "-o", tmp_path / "o.bpe", cwd=tmp_path))
        assert str(path) in line and "binary" in line
    assert not (tmp_path / "o.bpe").exists()


def test_utf16_file_is_named_as_such(tmp_path):
    for encoding in ("utf-16", "utf-32"):
        path = tmp_path / f"{encoding}.txt"
        path.write_bytes("hello world\n".encode(encoding))  # Python writes the byte-order mark
        with pytest.raises(ValueError, match=r"looks like UTF-16 \(or UTF-32\) text.*iconv -f utf-16 -t utf-8"):
            Tokenizer.train(path, 300)
        assert "UTF-16" in one_error_line(cli("train", path, "--vocab", "300", "-o", tmp_path / "o.bpe",
                                              cwd=tmp_path))
    assert not (tmp_path / "o.bpe").exists()


def test_pipe_is_refused_not_half_read(tmp_path, tok):
    # A pipe can be read once; reading it for the binary check would lose the
    # text's start. It is refused before it is opened (so this does not block).
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"fifo is not a regular file \(a pipe or a device\).*save the text"):
        Tokenizer.train(fifo, 300)
    tok.save(tmp_path / "t.bpe")
    for args in (["train", fifo, "--vocab", "300", "-o", "o.bpe"], ["encode", "-t", "t.bpe", fifo, "--out", "ds"]):
        assert "is not a regular file" in one_error_line(cli(*args, cwd=tmp_path))
    assert not (tmp_path / "o.bpe").exists() and not (tmp_path / "ds").exists()


def test_encode_and_info_read_a_pipe_once(tmp_path, tok):
    """`bpe encode` and `bpe info` stream: a pipe (`<(zcat c.gz)`) is read
    once, from its start, like stdin."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    tok.save(tmp_path / "t.bpe")
    text = TEXT[:50_000]
    for args, check in ((["encode", "-t", "t.bpe", fifo], lambda out: out.split() == list(map(str, tok.encode(text)))),
                        (["info", "-t", "t.bpe", fifo], lambda out: f"{fifo}: {len(tok.encode(text)):,} tokens" in out)):
        child = subprocess.Popen([sys.executable, "-m", "bpe", *map(str, args)], cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        with open(fifo, "w", encoding="utf-8") as w:  # opens once the child opens its end
            w.write(text)
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
        assert check(out.decode()), out.decode()[-300:]


def test_bad_id_is_named_with_its_position(tok, tmp_path):
    top = tok.n_vocab - 1
    for ids, where in (([1, 2, -1], r"ids\[2\] is -1"), ([5, 2**40], r"ids\[1\] is 1099511627776")):
        with pytest.raises(ValueError, match=rf"token ids must be ints in 0\.\.{top}: {where}"):
            tok.decode(ids)
    # Not ints at all: TypeError (tests/reliability/test_api_errors.py has bools).
    for ids, where in (([0, "7"], r"ids\[1\] is '7', not an int"), ([None], r"ids\[0\] is None, not an int")):
        with pytest.raises(TypeError, match=rf"token ids must be ints in 0\.\.{top}: {where}"):
            tok.decode(ids)
    with pytest.raises(ValueError, match=rf"unknown token id {top + 1}: this vocabulary has ids 0\.\.{top}"):
        tok.decode([0, top + 1])
    tok.save(tmp_path / "t.bpe")
    # The CLI reads ids as a stream: it names the byte offset of the bad one.
    line = one_error_line(cli("decode", "-t", "t.bpe", cwd=tmp_path, stdin="5 -1 5"))
    assert f"<stdin>: byte offset 2 holds a negative number: token ids are 0..{top}" in line


def test_file_with_windows_line_endings_loads_the_same(tok, tmp_path):
    # git with autocrlf rewrites text files to CRLF on checkout.
    tok.save(tmp_path / "t.bpe")
    tok.save_tiktoken(tmp_path / "t.tiktoken")
    for name in ("t.bpe", "t.tiktoken"):
        raw = (tmp_path / name).read_bytes()
        assert b"\r" not in raw
        (tmp_path / f"crlf-{name}").write_bytes(raw.replace(b"\n", b"\r\n"))
    assert Tokenizer.load(tmp_path / "crlf-t.bpe") == tok
    from_ranks = Tokenizer.from_tiktoken(tmp_path / "crlf-t.tiktoken", pattern=tok.pattern,
                                         special_tokens=tok.special_tokens)
    assert from_ranks.encode_ordinary(TEXT[:3000]) == tok.encode_ordinary(TEXT[:3000])
    # A CR anywhere else is still corruption.
    raw = (tmp_path / "t.bpe").read_bytes()
    (tmp_path / "cr.bpe").write_bytes(raw.replace(b"\nmerges", b"\r\nmerges"))
    with pytest.raises(bpe.TokenizerFileError):
        Tokenizer.load(tmp_path / "cr.bpe")


def test_file_name_given_as_str_to_train_warns(tmp_path, monkeypatch):
    # A plain str is text (documented); a str naming a file is probably a
    # mistake, so training says how to train on the file instead.
    (tmp_path / "corpus.txt").write_text(TEXT[:2000], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match=r"training on the text 'corpus.txt' itself.*pathlib.Path\('corpus.txt'\)"):
        Tokenizer.train("corpus.txt", 260, special_tokens=[])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Tokenizer.train(Path("corpus.txt"), 300, special_tokens=[]).n_vocab == 300


def test_lone_surrogates_in_training_text_train_as_replacement_characters():
    # What `encode` does with them (as tiktoken): U+FFFD. Training sees the same.
    text = "caf\udce9 x\ud800y " * 40
    tok = Tokenizer.train(text, 300, special_tokens=[])
    assert tok == Tokenizer.train(text.replace("\udce9", "\ufffd").replace("\ud800", "\ufffd"), 300,
                                  special_tokens=[])
    assert tok.decode(tok.encode(text)) == text.replace("\udce9", "\ufffd").replace("\ud800", "\ufffd")
    assert Tokenizer.train(["ok text", "bad \ud800"], 260, special_tokens=[]).n_vocab >= 257


def test_empty_corpus_is_an_error(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    cases = {"": "1 empty text", (): "no texts", ("", ""): "2 empty text", empty: f"1 empty file(s): {empty}"}
    for source, what in cases.items():
        with pytest.raises(ValueError, match=rf"the corpus is empty \({re.escape(what)}"):
            Tokenizer.train(source, 300)
    line = one_error_line(cli("train", empty, "--vocab", "300", "-o", tmp_path / "o.bpe", cwd=tmp_path))
    assert "the corpus is empty" in line and str(empty) in line
    # Text with no pair to merge is not empty: it trains, with the warning below.
    with pytest.warns(UserWarning, match="ran out of pairs"):
        assert Tokenizer.train("a", 300).n_vocab == 257


def test_vocab_size_out_of_range():
    with pytest.raises(ValueError, match="at least 258"):
        Tokenizer.train("abc", 257, special_tokens=["<a>", "<b>"])
    with pytest.raises(ValueError, match=rf"too large: it can be at most {MAX_VOCAB_SIZE}"):
        Tokenizer.train("abc", MAX_VOCAB_SIZE + 1)
    for bad in (300.0, "300", None):
        with pytest.raises(TypeError, match="vocab_size must be an int"):
            Tokenizer.train("abc", bad)


def test_vocab_size_beyond_the_corpus_warns_and_reports_the_size(tmp_path):
    corpus = tmp_path / "small.txt"
    corpus.write_text("ab ab ab", encoding="utf-8")
    result = cli("train", corpus, "--vocab", "1000", "-o", tmp_path / "o.bpe", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warning, summary = result.stderr.splitlines()
    assert warning == ("bpe: warning: the corpus ran out of pairs to merge: the vocabulary has 259 tokens, "
                       "not the 1000 asked for")
    assert "259 tokens" in summary
    assert Tokenizer.load(tmp_path / "o.bpe").n_vocab == 259


def test_duplicate_special_tokens():
    with pytest.raises(ValueError, match=r"duplicate special tokens: \['<a>'\]"):
        Tokenizer.train("abc", 300, special_tokens=["<a>", "<b>", "<a>"])
    with pytest.raises(ValueError, match="two special tokens share an id"):
        Tokenizer(special_tokens={"<a>": 300, "<b>": 300})
    with pytest.raises(ValueError, match="non-empty str"):
        Tokenizer(special_tokens={"": 300})


def test_special_token_that_is_also_ordinary_text(tok):
    text = "to be <|endoftext|> or not"
    # The default refuses it, saying how to go on; each way out works.
    with pytest.raises(ValueError) as info:
        tok.encode(text)
    message = str(info.value)
    assert "'<|endoftext|>'" in message and "allowed_special" in message and "encode_ordinary" in message
    special = tok.encode(text, allowed_special="all")
    assert tok.special_tokens["<|endoftext|>"] in special
    ordinary = tok.encode_ordinary(text)
    assert ordinary == tok.encode(text, disallowed_special=())
    assert tok.special_tokens["<|endoftext|>"] not in ordinary
    assert tok.decode(special) == tok.decode(ordinary) == text
    # In a training corpus special-token text is ordinary text.
    t = Tokenizer.train(("x <|endoftext|> y " * 50), 300, progress=False)
    assert t.decode(t.encode_ordinary("<|endoftext|>")) == "<|endoftext|>"
    # A special token whose text the training made an ordinary token: a warning that says what it means.
    with pytest.warns(UserWarning, match=r"special token 'the' \(id \d+\) is also the ordinary token \d+") as w:
        t = Tokenizer.train("the the the then there", 300, special_tokens=["the"])
    (found,) = [m for x in w if (m := re.search(r"\(id (\d+)\) is also the ordinary token (\d+)", str(x.message)))]
    special, ordinary = map(int, found.groups())
    assert t.special_tokens["the"] == special and t.vocab[ordinary] == b"the"


def test_invalid_regex():
    with pytest.raises(ValueError, match=r'invalid split pattern "\(\(":'):
        Tokenizer.train("abc", 300, pattern="((")
    with pytest.raises(ValueError, match=r"unknown pattern name 'gpt5'"):
        Tokenizer.train("abc", 300, pattern="gpt5")
    # in a file: see test_load_refuses below ("invalid-regex").


def test_pattern_that_skips_text_is_an_error_not_a_loss():
    t = Tokenizer(pattern=r"\w+")
    with pytest.raises(ValueError, match=r"matches nothing at byte 1 of the text .* end it with `\|\[\\s\\S\]`"):
        t.encode("a b")
    with pytest.raises(ValueError, match="matches nothing at byte 0"):
        Tokenizer.train(", no", 300, pattern=r"\w+")
    assert Tokenizer(pattern=r"\w+|[\s\S]").encode("a b") == [97, 32, 98]


@pytest.mark.parametrize("pattern, text", [
    (r"(a|a)*(?=b)|[\s\S]", "a" * 30_000),             # exponential: the backtracking limit stops it
    (r"(a+)+(?!x)c|[\s\S]", "a" * 30_000 + "b"),
    (r"\s+(?!\S)|\s|\S+", " " * 1_000_000 + "x"),       # the lookahead that makes tiktoken panic
])
def test_catastrophic_backtracking_is_bounded(pattern, text):
    t = Tokenizer(pattern=pattern)
    for work in (lambda: t.encode_ordinary(text), lambda: bpe.pretokenize(text, pattern),
                 lambda: Tokenizer.train(text, 300, pattern=pattern, progress=False)):
        start = time.monotonic()
        try:
            work()
        except ValueError as e:
            assert "the split pattern failed on this text" in str(e) and "simpler pattern" in str(e)
        assert time.monotonic() - start < 10


def test_directory_where_a_file_is_expected(tok, tmp_path):
    d = tmp_path / "a-directory"
    d.mkdir()
    # Training takes a directory for the files under it; an empty one has none.
    with pytest.raises(ValueError, match="a-directory is a directory with no files in it"):
        Tokenizer.train(d, 300)
    for call in (lambda: Tokenizer.load(d), lambda: tok.save(d), lambda: tok.save_tiktoken(d),
                 lambda: Tokenizer.from_huggingface(d),
                 lambda: Tokenizer.from_tiktoken(d, pattern="gpt4")):
        with pytest.raises(IsADirectoryError):
            call()
    assert d.is_dir() and list(d.iterdir()) == []
    assert list(tmp_path.iterdir()) == [d]  # no temporary files left
    tok.save(tmp_path / "t.bpe")
    for args in (["train", d, "--vocab", "300"], ["decode", "-t", d], ["info", "-t", "t.bpe", d],
                 ["encode", "-t", "t.bpe", d], ["encode", "-t", "t.bpe", d, "--out", "ds"], ["decode", "-t", "t.bpe", d]):
        assert str(d) in one_error_line(cli(*args, cwd=tmp_path))
