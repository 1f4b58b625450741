"""Tokenizer files (bpe/formats/bpefile.py, ``Tokenizer.save``/``load``) and
pickling: save/load round trips, every way a file can be bad, and
tokenizers crossing process boundaries. How a save writes its file (atomic,
what it may replace) is tests/util/test_files.py's.

One small tokenizer is trained per module (on ~150 KB of tinyshakespeare with a
few hundred tokens), so the whole file runs in a few seconds.
"""

from __future__ import annotations

import concurrent.futures
import copy
import json
import multiprocessing
import os
import pickle
from pathlib import Path

import pytest

import bpe
import bpe.tokenizer
from bpe.formats import bpefile
from helpers import MULTILINGUAL, SHAKESPEARE, body_lines, with_checksum

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
    assert lines[0] == f"{bpefile.FILE_MAGIC} v{bpefile.FILE_VERSION}"
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
# tests/reliability/test_bad_input.py::test_file_with_windows_line_endings_loads_the_same.


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
