"""Reliability (docs/reliability.md), 1. Fuzzing and 5. what ``load``
refuses: hypothesis for the file parser, the Python API and the CLI's argument
handling; the cargo-fuzz targets' kept inputs are replayed by `cargo test`
(rust/fuzzing.rs); each kind of bad tokenizer file gets its own error.

The other items have files beside this one: test_bad_input.py (2),
test_long_lines.py and test_interrupts.py (3), test_concurrency.py (4),
test_limits.py (6).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import bpe
import bpe.cli
from bpe import Tokenizer, TokenizerFileError
from conftest import ROOT
from helpers import SHAKESPEARE, body_lines, with_checksum

TEXT = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
SPECIALS = ["<|endoftext|>", "<|fim|>"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXT, 400, special_tokens=SPECIALS, progress=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reliability")


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


# -- what load refuses ------------------------------------------------------------------
# Training with 1 and 2 threads (and different hash seeds) gives byte-identical
# files: tests/tokenizer/test_train.py::test_deterministic_across_hash_seeds_and_threads.
# Truncated, corrupted, wrong-version files: tests/formats/test_bpefile.py (truncated
# at every line, one flipped byte anywhere, merges naming unknown ids, ...).


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
