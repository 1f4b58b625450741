"""Reliability: bad input, crashes, concurrency and determinism (README:
"Reliability"). One section per item of that README section; where another
test file already covers a case, the test here names it instead of repeating it.

1. Fuzzing          hypothesis for the file parser, the Python API and the CLI's
                    argument handling; the cargo-fuzz targets' kept inputs are
                    replayed by `cargo test` (rust/fuzzing.rs).
2. Bad input        each kind of bad input gives a specific error.
3. No crash/loss    panics, SIGKILL during a save, Ctrl-C during work.
4. Concurrency      8 threads on one Tokenizer.
5. Determinism      and what `load` refuses.
6. Limits           the documented limits hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import bpe
import bpe.cli
import bpe.data
import bpe.tokenizer
from bpe import Tokenizer, TokenizerFileError
from conftest import default_sigint

ROOT = Path(__file__).resolve().parents[1]
SHAKESPEARE = ROOT / "corpora" / "tinyshakespeare.txt"
TEXT = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
SPECIALS = ["<|endoftext|>", "<|fim|>"]
MiB = 1 << 20


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXT, 400, special_tokens=SPECIALS, progress=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reliability")


def with_checksum(body: str) -> bytes:
    return (body + f"sha256 {hashlib.sha256(body.encode('utf-8')).hexdigest()}\n").encode("utf-8")


def body_lines(raw: bytes) -> list[str]:
    lines = raw.decode("utf-8").split("\n")
    assert lines[-1] == "" and lines[-2].startswith("sha256 ")
    return lines[:-2]


def python(script: str, *args, **kwargs) -> subprocess.Popen:
    """A child Python running ``script`` (with bpe importable from anywhere)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUTF8="1")
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        **kwargs,
    )


def cli(*args, cwd, stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUTF8="1")
    return subprocess.run(
        [sys.executable, "-m", "bpe", *map(str, args)],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """A failed `bpe` run: exit status 1, one `bpe: error:` line, no traceback."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: error: "), result.stderr
    return lines[0]


# =============================================================================
# 1. Fuzzing
# =============================================================================

FUZZ_TARGETS = ["custom_pattern", "encode_decode", "encoder_new", "pretokenize", "train"]


def test_fuzz_targets_have_regression_folders_replayed_by_cargo_test():
    """Each cargo-fuzz target calls bpe::fuzzing::<target>; the inputs kept in
    tests/fuzz_regressions/<target>/ are replayed through the same function by
    the Rust test `fuzzing::tests::fuzz_regressions` (stable `cargo test`)."""
    targets = sorted(p.stem for p in (ROOT / "fuzz" / "fuzz_targets").glob("*.rs"))
    assert targets == FUZZ_TARGETS
    fuzzing_rs = (ROOT / "rust" / "fuzzing.rs").read_text(encoding="utf-8")
    for t in targets:
        assert f"bpe::fuzzing::{t}(data)" in (ROOT / "fuzz" / "fuzz_targets" / f"{t}.rs").read_text()
        assert f'("{t}", {t})' in fuzzing_rs
        kept = [p for p in (ROOT / "tests" / "fuzz_regressions" / t).iterdir() if p.suffix != ".md"]
        assert kept, f"no inputs kept for {t}"


# -- the file parser (Tokenizer.load is Python: fuzzed with hypothesis) --------

@pytest.fixture(scope="module")
def good_file(workdir) -> bytes:
    small = Tokenizer.train(TEXT[:20_000], 300, special_tokens=SPECIALS, progress=False)
    path = workdir / "small.bpe"
    small.save(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def good_ranks_file(workdir, good_file) -> bytes:
    """The same tokenizer saved as ranks (the format of tiktoken-loaded vocabularies)."""
    small = Tokenizer._parse(good_file, "x")
    ranked = Tokenizer(pattern=small.pattern, special_tokens=small.special_tokens, ranks=small._ranks())
    path = workdir / "ranks.bpe"
    ranked.save(path)
    return path.read_bytes()


LINE_EDITS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "0", "-1", "+5", " 5", "٥", "1e3", "4294967295", "16777216", "99999999999999999999",
                     "256 256", "0 0", "1 2 3", '"<|endoftext|>" 0', '"" 300', "merges 0", "ranks 1",
                     "special_tokens 2", 'pattern "(("', "pattern " + "[" * 5000, "pattern null",
                     "AA== 0", "!!!! 1", "YWI= 999"]),
)


@st.composite
def mutated(draw, raw: bytes) -> bytes:
    lines = body_lines(raw)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["replace", "delete", "duplicate", "insert", "swap", "append"]))
        if op == "replace":
            lines[i] = draw(LINE_EDITS)
        elif op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "insert":
            lines.insert(i, draw(LINE_EDITS))
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines[i] += draw(st.text(max_size=5))
    body = "\n".join(lines) + "\n"
    # Mostly a valid checksum, so that the parser behind it is what is tested.
    if draw(st.booleans()) or draw(st.booleans()):
        return with_checksum(body)
    return body.encode("utf-8", "surrogatepass") + b"sha256 0\n"


def _parse_or_refuse(raw: bytes) -> None:
    """Loads, or refuses with a TokenizerFileError naming the file: nothing else.
    What loads must work."""
    try:
        loaded = Tokenizer._parse(raw, "fuzzed.bpe")
    except TokenizerFileError as e:
        assert str(e).startswith("fuzzed.bpe: ")
        return
    try:
        ids = loaded.encode("Hello, world! 1234 \u00e9\u65e5 <|endoftext|>", allowed_special="all")
    except ValueError as e:  # a loaded custom pattern may not cover this text: a clear error
        assert "split pattern" in str(e)
        return
    assert loaded.decode(ids).startswith("Hello, world!")


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_load_merges_file(good_file, data):
    _parse_or_refuse(data.draw(mutated(good_file)))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_load_ranks_file(good_ranks_file, data):
    _parse_or_refuse(data.draw(mutated(good_ranks_file)))


@given(raw=st.binary(max_size=200))
def test_fuzz_load_random_bytes(raw):
    for prefix in (b"", b"bpe-tokenizer v1\n"):
        _parse_or_refuse(prefix + raw)


# -- the Python API -------------------------------------------------------------

ANY_ID = st.one_of(
    st.integers(0, 420), st.integers(-(2**70), 2**70), st.just(-1), st.just(2**32), st.booleans(),
    st.floats(allow_nan=True), st.text(max_size=2), st.none(), st.just(b"\x01"),
)


@given(ids=st.lists(ANY_ID, max_size=12))
def test_fuzz_decode_any_ids(tok, ids):
    # A bool is an int to Python, but not a token id.
    valid = all(type(i) is int and 0 <= i < tok.n_vocab for i in ids)
    if valid:
        expected = b"".join(tok.vocab.get(i) or next(s.encode() for s, j in tok.special_tokens.items() if j == i)
                            for i in ids)
        assert tok.decode_bytes(ids) == expected
        assert tok.decode(ids) == expected.decode("utf-8", "replace")
        return
    with pytest.raises((ValueError, TypeError)) as info:
        tok.decode(ids)
    assert re.search(r"token ids must be ints in 0\.\.\d+|unknown token id", str(info.value)), info.value


@given(i=ANY_ID)
def test_fuzz_token_bytes_any_id(tok, i):
    if type(i) is int and 0 <= i < tok.n_vocab:
        assert tok.token_bytes(i) == tok.decode_bytes([i])
    else:
        with pytest.raises((ValueError, TypeError), match="token id"):
            tok.token_bytes(i)


NO_SURROGATES = st.characters(exclude_categories=["Cs"])


@given(
    specials=st.lists(st.text(NO_SURROGATES, min_size=1, max_size=6), max_size=5, unique=True),
    parts=st.lists(st.text(NO_SURROGATES, max_size=12), max_size=6),
    picks=st.lists(st.integers(0, 10), max_size=6),
)
def test_fuzz_special_tokens(tok, specials, parts, picks):
    """Any set of special tokens, any text with them in it: allowed, they
    become their ids and decode back; disallowed, a ValueError that says how
    to allow them; encode_ordinary treats them as text."""
    special_ids = {s: tok.n_vocab + i for i, s in enumerate(specials)}
    t = Tokenizer(tok.merges, tok.pattern, special_ids)
    text = ""
    for k, part in enumerate(parts):
        text += part
        if specials and k < len(picks):
            text += specials[picks[k] % len(specials)]
    ids = t.encode(text, allowed_special="all")
    assert t.decode(ids) == text
    assert t.decode(t.encode_ordinary(text)) == text
    assert t.encode(text, disallowed_special=()) == t.encode_ordinary(text)
    if any(s in text for s in specials):
        with pytest.raises(ValueError, match="allowed_special"):
            t.encode(text)
    else:
        assert t.encode(text) == t.encode_ordinary(text)
    assert t.encode_batch([text, text], allowed_special="all") == [ids, ids]


@given(
    text=st.text(max_size=40),
    specials=st.lists(st.one_of(st.text(max_size=4), st.integers(), st.none()), max_size=4),
)
def test_fuzz_train_arguments(text, specials):
    """Training with arbitrary texts and special-token lists: a tokenizer, or
    ValueError/TypeError, nothing else."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = Tokenizer.train(text, 300, special_tokens=specials, progress=False)
    except (ValueError, TypeError) as e:
        assert str(e)
        return
    clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert t.decode(t.encode_ordinary(text)) == clean


# -- the command line -------------------------------------------------------------

ARG = st.one_of(
    st.sampled_from([
        "train", "encode", "decode", "info", "gpt", "sample", "--vocab", "300", "1k", "0", "-5", "banana",
        "1e99", "99999999999999999999k", "16Mi", "--pattern", "gpt2", "gpt4o", "((", "(?=a)", r"\w+", "a{99999}",
        "--special", "<|x|>", "", "--no-special", "-o", "out.bpe", "--out", "ds", "--val-fraction", "0.5",
        "nan", "2", "-t", "tok.bpe", "corpus.txt", "missing.txt", "adir", "latin1.txt", "binary.bin",
        "empty.txt", "-q", "--allow-special", "-", "--steps", "\x00", "\udcff", "--help", "-h",
    ]),
    st.text(max_size=6),
)


@pytest.fixture(scope="module")
def cli_dir(workdir, tok) -> Path:
    d = workdir / "cli"
    d.mkdir()
    (d / "corpus.txt").write_text(TEXT[:5000], encoding="utf-8")
    (d / "latin1.txt").write_bytes(b"caf\xe9\n")
    (d / "binary.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    (d / "empty.txt").write_bytes(b"")
    (d / "adir").mkdir()
    tok.save(d / "tok.bpe")
    return d


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(ARG, max_size=8))
def test_fuzz_cli_arguments(cli_dir, argv):
    """Any argument list: exit status 0, 1 (one `bpe: error:` line) or 2
    (argparse's usage and error lines); never a traceback."""
    assume("--data" not in argv and "--ckpt" not in argv)  # never start a real GPT run
    err, out = io.StringIO(), io.StringIO()
    old_cwd, old_stdin = os.getcwd(), sys.stdin
    os.chdir(cli_dir)
    sys.stdin = io.StringIO("1 2 3 -4 x 99999999999")
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                status = bpe.cli.main(argv)
            except SystemExit as e:  # argparse: usage errors (2), --help (0)
                status = e.code
    finally:
        os.chdir(old_cwd)
        sys.stdin = old_stdin
    lines = [l for l in err.getvalue().splitlines() if not l.startswith("bpe: warning: ")]
    assert status in (0, 1, 2), (status, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if status == 1:
        assert len(lines) == 1 and lines[0].startswith("bpe: error: "), err.getvalue()
    elif status == 2:
        assert lines and "error:" in lines[-1], err.getvalue()


# =============================================================================
# 2. Bad input
# =============================================================================
# Covered elsewhere (referenced, not repeated):
#   vocab_size below 256 + specials ....... test_train.py::test_bad_arguments, test_cli.py::test_bad_input
#   duplicate special tokens (train) ...... test_train.py::test_bad_arguments, test_cli.py::test_bad_input
#   missing file, unwritable output ....... test_cli.py::test_bad_input, test_read_only_output_directory
#   vocab_size beyond the corpus (API) .... test_train.py::test_small_corpus_stops_early_with_warning
#   out-of-range and negative ids ......... test_encode.py::test_decode_bad_ids, test_cli.py (decode-*)


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
    # Not ints at all: TypeError (tests/test_api_errors.py has bools).
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
    with pytest.raises(ValueError, match=rf"too large: it can be at most {bpe.tokenizer.MAX_VOCAB_SIZE}"):
        Tokenizer.train("abc", bpe.tokenizer.MAX_VOCAB_SIZE + 1)
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


# -- a single very long line ----------------------------------------------------------

def test_one_gigabyte_line_is_refused_at_once(tmp_path):
    """A 1 GB file of one line (sparse: NUL bytes after an 'a') is refused as
    binary before anything is read past its first 64 KiB."""
    big = tmp_path / "one-line.txt"
    with open(big, "wb") as f:
        f.write(b"a")
        f.truncate(1 << 30)
    start = time.monotonic()
    with pytest.raises(ValueError, match="binary file"):
        Tokenizer.train(big, 300)
    assert "binary" in one_error_line(cli("train", big, "--vocab", "300", cwd=tmp_path))
    assert time.monotonic() - start < 30


def test_long_line_without_cut_point_is_refused_after_64_mib(tmp_path, tok):
    """A line with no safe cut point (one 80 MB word) is an error naming the
    file, offset and line after 64 MiB, not a buffer that grows to the line."""
    path = tmp_path / "word.txt"
    with open(path, "wb") as f:
        f.write(b"first line\n")
        f.write(b"a" * (80 * MiB))
    message = r"word.txt: the \d+ bytes from byte offset 11 \(line 2\) hold no point where the text can be cut"
    with pytest.raises(ValueError, match=message):
        Tokenizer.train(path, 300)
    tok_path = tmp_path / "t.bpe"
    tok.save(tok_path)
    with pytest.raises(ValueError, match=message):
        bpe.data.write_dataset([path], tok_path, tmp_path / "ds", progress=False)
    assert not (tmp_path / "ds").exists()


LONG_LINE_SCRIPT = """
import sys, warnings
from pathlib import Path
import bpe
warnings.simplefilter("ignore")
def status(key):  # kB
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0])
before = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # peak RSS (VmHWM) := current RSS
tok = bpe.Tokenizer.train(Path(sys.argv[1]), 600, progress=False)
tok.save(sys.argv[2])
print((status("VmHWM") - before) // 1024)
"""


def test_long_line_of_words_streams_in_bounded_memory(tmp_path):
    """A 48 MB line of ordinary words is read in segments cut between words
    (the word cut, proven in rust/pretokenize.rs): peak memory grows by far
    less than the line, and the merges are those of the whole line."""
    words = TEXT[:200_000].replace("\n", " ")
    line = (words * (48 * MiB // len(words) + 1))[: 48 * MiB]
    path = tmp_path / "line.txt"
    path.write_text(line, encoding="utf-8")
    child = python(LONG_LINE_SCRIPT, path, tmp_path / "file.bpe")
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    grew_mb = int(out)
    assert grew_mb < 40, f"peak RSS grew by {grew_mb} MB for a 48 MB line"
    whole = Tokenizer.train(line, 600, progress=False)
    assert Tokenizer.load(tmp_path / "file.bpe") == whole


@pytest.mark.parametrize("allow_special", [False, True])
def test_long_line_dataset_pieces_equal_the_whole(allow_special, tmp_path, tok):
    """`bpe encode --out` cuts a line without newlines at word cuts: the ids
    are those of encoding the whole line. With special tokens allowed, only
    at line cuts ("<|endoftext|>" holds a word cut, "t|")."""
    words = TEXT[:60_000].replace("\n", " ")
    # Digits and special tokens only: the only word cuts are inside "<|endoftext|>".
    digits = "".join(f"{i}, <|endoftext|>" for i in range(5000))
    line = digits if allow_special else words
    path = tmp_path / "line.txt"
    path.write_text(line + "\n" + line, encoding="utf-8")
    tok_path = tmp_path / "t.bpe"
    tok.save(tok_path)
    bpe.data.write_dataset([path], tok_path, tmp_path / "ds", val_fraction=0, block_bytes=997, progress=False,
                           allowed_special="all" if allow_special else (), disallowed_special=())
    raw = (tmp_path / "ds" / "train.bin").read_bytes()
    ids = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    text = line + "\n" + line
    assert ids == (tok.encode(text, allowed_special="all") if allow_special else tok.encode_ordinary(text))


# =============================================================================
# 3. No crash, no loss
# =============================================================================
# Covered elsewhere: a failing save (disk full, Ctrl-C inside the write) keeps
# the old file: test_files.py::test_failed_save_keeps_old_file; a failed
# `bpe encode --out` keeps the old dataset: test_cli.py::test_failed_encode_keeps_existing_dataset.


@pytest.mark.parametrize("threads", [0, 2])
def test_rust_panic_becomes_a_python_exception(threads):
    """A panic in the core (here provoked on purpose, in the calling thread or
    in worker threads with the GIL released) is a RuntimeError, which
    `except Exception` catches, and the interpreter goes on working."""
    with pytest.raises(RuntimeError, match="internal error in the bpe Rust core: provoked panic") as info:
        bpe._core._panic_for_tests(threads)
    assert isinstance(info.value, Exception)
    t = Tokenizer.train("hello hello", 258, special_tokens=())
    assert t.decode(t.encode("hello")) == "hello"


def test_out_of_range_ids_in_a_file_do_not_abort_the_process(tmp_path):
    """Found by this work: a special token id near 2**32 in a (checksummed)
    file made the core allocate 64 GB and abort the interpreter. Now it is a
    TokenizerFileError. (Run in a child: a regression must not kill pytest.)"""
    body = f'bpe-tokenizer v1\npattern {json.dumps(bpe.GPT2_PATTERN)}\nspecial_tokens 1\n"<x>" 4294967295\nmerges 0\n'
    path = tmp_path / "huge-id.bpe"
    path.write_bytes(with_checksum(body))
    child = python("import sys, bpe\ntry:\n bpe.Tokenizer.load(sys.argv[1])\nexcept bpe.TokenizerFileError as e:\n print(e)",
                   path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert "out of range" in out.decode() and "4294967295" in out.decode()


SAVE_LOOP = """
import sys, time
import bpe, bpe.files as F
a, b = bpe.Tokenizer.load(sys.argv[1]), bpe.Tokenizer.load(sys.argv[2])
real = F.atomic_write
def slow(path, fill, **options):  # write each file in two halves, with a pause between
    def halves(f):
        class Slow:
            def write(self, data):
                f.write(data[: len(data) // 2]); f.flush(); time.sleep(0.003); f.write(data[len(data) // 2 :])
        fill(Slow())
    real(path, halves, **options)
F.atomic_write = slow
print("ready", flush=True)
i = 0
while True:
    (a if i % 2 else b).save(sys.argv[3])
    i += 1
"""


def test_sigkill_during_save_leaves_the_previous_file(tmp_path, tok):
    """A process killed with SIGKILL while saving (over and over) leaves the
    target as one complete file, the old or the new, never a mix or a stub."""
    a_path, b_path, target = tmp_path / "a.bpe", tmp_path / "b.bpe", tmp_path / "target.bpe"
    tok.save(a_path)
    Tokenizer.train(TEXT, 500, progress=False).save(b_path)
    versions = {a_path.read_bytes(), b_path.read_bytes()}
    target.write_bytes(a_path.read_bytes())
    rng = random.Random(1)
    killed_mid_save = 0
    for _ in range(8):
        child = python(SAVE_LOOP, a_path, b_path, target)
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.02, 0.3))
        child.send_signal(signal.SIGKILL)
        child.communicate()
        assert target.read_bytes() in versions
        Tokenizer.load(target)
        leftovers = list(tmp_path.glob(".bpe-*.tmp"))  # the unfinished write, under its own name
        killed_mid_save += bool(leftovers)
        for p in leftovers:
            p.unlink()
    assert killed_mid_save, "no kill landed inside a save; the test proved nothing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bpe", "b.bpe", "target.bpe"]


INTERRUPT = """
import sys, time
from pathlib import Path
import bpe
what = sys.argv[1]
tok = bpe.Tokenizer.train("hello world, this is some text " * 50, 300, progress=False)
big = ("The quick brown fox jumps over the lazy dog. " * 20 + "\\n") * 150_000   # 136 MB
try:
    print("start", flush=True)
    if what == "train-text":
        # The corpus file's random words, 40 MB: `big` (a dozen distinct
        # chunks) trains in ~0.2 s, too quick to be interrupted.
        bpe.Tokenizer.train(Path(sys.argv[2]).read_text() * 5, 5000, progress=False)
    elif what == "train-file":
        bpe.Tokenizer.train([Path(sys.argv[2])] * 20, 5000, progress=False)
    elif what == "encode":
        tok.encode_ordinary(big)
    elif what == "encode-special":
        tok.encode(big, allowed_special="all")
    elif what == "encode-batch":
        tok.encode_batch([big[i : i + 2_000_000] for i in range(0, len(big), 2_000_000)])
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.parametrize("what", ["train-text", "train-file", "encode", "encode-special", "encode-batch"])
def test_ctrl_c_returns_control_promptly(what, tmp_path):
    corpus = tmp_path / "corpus.txt"
    # 8 MB of random words (trained from 20 times over, or 5 times as one
    # str): seconds of training. Repeated prose, with few distinct chunks,
    # trained 60 MB before the interrupt landed.
    corpus.write_text(random_words(8 * MiB), encoding="utf-8")
    child = python(INTERRUPT, what, corpus, preexec_fn=default_sigint)
    assert child.stdout.readline() == b"start\n"
    time.sleep(0.3)  # well inside the Rust call, which takes seconds
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = child.communicate(timeout=60)
    latency = time.monotonic() - sent
    assert out == b"interrupted\n", (out, err)
    assert latency < 2.5, f"{what}: {latency:.1f} s from Ctrl-C to KeyboardInterrupt"


SIGINT_PROBE = """
import signal
h = signal.getsignal(signal.SIGINT)
print("default" if h is signal.default_int_handler else "ignored" if h == signal.SIG_IGN else repr(h))
"""


def test_ctrl_c_tests_work_when_sigint_is_ignored():
    """The Ctrl-C tests must pass under `nohup` or `cmd &` (SIGINT ignored and
    inherited by children): `default_sigint` gives their child Python its
    KeyboardInterrupt handler back. Checked here by ignoring SIGINT in this
    process, as such a shell would, and starting children both ways."""
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        plain = python(SIGINT_PROBE).communicate(timeout=60)[0]
        restored = python(SIGINT_PROBE, preexec_fn=default_sigint).communicate(timeout=60)[0]
    finally:
        signal.signal(signal.SIGINT, saved)
    assert plain == b"ignored\n"  # what broke the Ctrl-C tests under nohup
    assert restored == b"default\n"


def random_words(n_bytes: int, seed: int = 0) -> str:
    """Text of random words over 8 letters: many distinct chunks, so that
    training takes a while (seconds) however fast it gets."""
    table = bytes((b"abcdefgh" * 32)[i] if i % 9 else 32 for i in range(256))
    return random.Random(seed).randbytes(n_bytes).translate(table).decode("ascii")


@pytest.mark.parametrize("command", ["train", "encode"])
def test_ctrl_c_in_the_cli_leaves_no_file(command, tmp_path, tok):
    """`bpe train` (output file) and `bpe encode --out` (dataset directory)
    interrupted: exit status 130, and nothing written, not even a temporary."""
    corpus = tmp_path / "corpus.txt"
    if command == "train":
        # 40 MB: ~3 s of training. 10 MB once finished inside the 1 s wait
        # below (CI, release build), and the interrupt then came too late.
        corpus.write_text(random_words(40 * MiB), encoding="utf-8")
    else:
        corpus.write_text(TEXT * 800, encoding="utf-8")  # 80 MB
    tok.save(tmp_path / "tok.bpe")
    args = {"train": ["train", corpus, "--vocab", "20k", "-o", tmp_path / "out.bpe"],
            "encode": ["encode", "-t", tmp_path / "tok.bpe", corpus, "--out", tmp_path / "ds"]}[command]
    env = dict(os.environ, PYTHONUTF8="1")
    child = subprocess.Popen([sys.executable, "-m", "bpe", *map(str, args)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                             preexec_fn=default_sigint)
    deadline = time.monotonic() + 30
    if command == "train":
        time.sleep(1.0)
    else:  # interrupt once the dataset's temporary files exist: mid-write
        while not list(tmp_path.glob("ds/.bpe-*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, err = child.communicate(timeout=60)
    assert time.monotonic() - sent < 2.5
    assert child.returncode == 130 and err.decode().strip().endswith("bpe: interrupted"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "tok.bpe"]


# =============================================================================
# 4. Concurrency
# =============================================================================
# Also: test_encode.py::test_threads_share_one_tokenizer (encode_ordinary).


def test_eight_threads_on_one_tokenizer_equal_sequential(tok):
    texts = [TEXT[i : i + 7000] + f" <|fim|> {i} <|endoftext|>" for i in range(0, 90_000, 7000)]
    ids = [tok.encode(t, allowed_special="all") for t in texts]
    expected = {
        "encode": ids,
        "encode_ordinary": [tok.encode_ordinary(t) for t in texts],
        "encode_batch": tok.encode_batch(texts, allowed_special="all"),
        "decode": [tok.decode(i) for i in ids],
    }
    assert expected["decode"] == texts
    barrier = threading.Barrier(8)
    results, errors = [], []

    def work(seed):
        try:
            order = list(expected)
            random.Random(seed).shuffle(order)
            barrier.wait()
            got = {}
            for _ in range(3):
                for name in order:
                    if name == "encode":
                        got[name] = [tok.encode(t, allowed_special="all") for t in texts]
                    elif name == "encode_ordinary":
                        got[name] = [tok.encode_ordinary(t) for t in texts]
                    elif name == "encode_batch":
                        got[name] = tok.encode_batch(texts, allowed_special="all", num_threads=2)
                    else:
                        got[name] = [tok.decode(i) for i in ids]
                results.append(got)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 24 and all(r == expected for r in results)


# =============================================================================
# 5. Determinism and what load refuses
# =============================================================================
# Training with 1 and 2 threads (and different hash seeds) gives byte-identical
# files: test_train.py::test_deterministic_across_hash_seeds_and_threads.
# Truncated, corrupted, wrong-version files: test_files.py (truncated at every
# line, one flipped byte anywhere, merges naming unknown ids, ...).


def _edit(raw: bytes, edit) -> bytes:
    return with_checksum("\n".join(edit(body_lines(raw))) + "\n")


def _first(lines, prefix):
    return next(i for i, l in enumerate(lines) if l.startswith(prefix))


def _replace_after(prefix, k, new):
    def edit(lines):
        lines[_first(lines, prefix) + k] = new(lines[_first(lines, prefix) + k]) if callable(new) else new
        return lines
    return edit


LOAD_REFUSES = {
    # what is wrong -> (which file, edit, words the error must contain)
    "merge-part-missing": ("merges", _replace_after("merges ", 1, "256 300"), "no earlier merge made"),
    "merge-negative-id": ("merges", _replace_after("merges ", 1, "-1 5"), "not a non-negative integer"),
    "merge-id-not-canonical": ("merges", _replace_after("merges ", 1, "+32 116"), "not a non-negative integer"),
    "merge-id-arabic-digits": ("merges", _replace_after("merges ", 1, "٣٢ 116"), "not a non-negative integer"),
    "count-negative": ("merges", lambda l: [x if not x.startswith("special_tokens ") else "special_tokens -1"
                                           for x in l], "not a non-negative integer"),
    "special-duplicated": ("merges", lambda l: l[:3] + [l[3], l[3]] + l[4:], "appears twice"),
    "special-id-out-of-range": ("merges", _replace_after("special_tokens ", 1, '"<|endoftext|>" 16777216'),
                                "out of range"),
    "special-id-taken": ("merges", _replace_after("special_tokens ", 1, '"<|endoftext|>" 100'), "taken"),
    "special-not-a-string": ("merges", _replace_after("special_tokens ", 1, "5 299"), "not a str"),
    "invalid-regex": ("merges", lambda l: [l[0], 'pattern "(("', *l[2:]], "invalid split pattern"),
    "deeply-nested-json": ("merges", lambda l: [l[0], "pattern " + "[" * 100_000, *l[2:]], "corrupted"),
    "token-bytes-duplicated": ("ranks", _replace_after("ranks ", 290, lambda x: "IQ== " + x.split()[1]),
                               "line 290: token b'!' appears twice (first on line 34)"),
    "rank-out-of-range": ("ranks", _replace_after("ranks ", 280, lambda x: x.split()[0] + " 16777216"),
                          "out of range"),
    "rank-id-shared": ("ranks", _replace_after("ranks ", 280, lambda x: x.split()[0] + " 5"), "both have rank"),
    "rank-blank-line": ("ranks", _replace_after("ranks ", 100, ""), "line 100"),
    "rank-missing-byte": ("ranks", _replace_after("ranks ", 1, lambda x: "YWJj 0"), "all 256 single bytes"),
    "rank-not-base64": ("ranks", _replace_after("ranks ", 5, "!!!! 4"), "base64"),
    # Found by test_fuzz_load_ranks_file: a ranks section one line short was a RuntimeError.
    "ranks-fewer-than-announced": ("ranks", lambda l: [x for i, x in enumerate(l) if i != 10], "truncated"),
}


@pytest.mark.parametrize("case", list(LOAD_REFUSES), ids=list(LOAD_REFUSES))
def test_load_refuses(case, good_file, good_ranks_file, tmp_path):
    kind, edit, words = LOAD_REFUSES[case]
    raw = _edit(good_file if kind == "merges" else good_ranks_file, edit)
    path = tmp_path / f"{case}.bpe"
    path.write_bytes(raw)
    with pytest.raises(TokenizerFileError) as info:
        Tokenizer.load(path)
    assert str(info.value).startswith(f"{path}: ") and words in str(info.value), info.value


def test_load_accepts_the_unedited_files(good_file, good_ranks_file):
    for raw in (good_file, good_ranks_file):
        assert _edit(raw, lambda lines: lines) == raw
        assert Tokenizer._parse(raw, "x").encode("to be or not") == Tokenizer._parse(good_file, "y").encode("to be or not")


def test_from_tiktoken_file_refuses_duplicate_tokens(tmp_path, tok):
    path = tmp_path / "dup.tiktoken"
    tok.save_tiktoken(path)
    lines = path.read_text().splitlines()
    lines[300] = "IQ== " + lines[300].split()[1]  # b"!" again
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"line 301: token b'!' appears twice \(first on line 34\)"):
        Tokenizer.from_tiktoken(path, pattern="gpt4")


# =============================================================================
# 6. Limits (README: "Limits")
# =============================================================================


def test_limits_in_readme_match_the_code():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    limits = readme[readme.index("## Limits"):]
    assert f"{bpe.tokenizer.MAX_ID:,}" in limits
    assert f"{bpe.data.MAX_UNCUT_BYTES >> 20} MiB" in limits
    limits_rs = (ROOT / "rust" / "limits.rs").read_text(encoding="utf-8")
    assert f"MAX_UNCUT_BYTES: usize = {bpe.data.MAX_UNCUT_BYTES >> 20} << 20" in limits_rs
    vocab_rs = (ROOT / "rust" / "vocab.rs").read_text(encoding="utf-8")
    assert "pub const MAX_ID: Rank = (1 << 24) - 1;" in vocab_rs and bpe.tokenizer.MAX_ID == (1 << 24) - 1


def test_largest_id_is_usable():
    t = Tokenizer(pattern="gpt2", special_tokens={"<last>": bpe.tokenizer.MAX_ID})
    assert t.n_vocab == bpe.tokenizer.MAX_ID + 1
    assert t.decode(t.encode("a<last>", allowed_special="all")) == "a<last>"
    with pytest.raises(ValueError, match="out of range"):
        Tokenizer(pattern="gpt2", special_tokens={"<last>": bpe.tokenizer.MAX_ID + 1})
