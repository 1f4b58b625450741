"""Reliability (docs/reliability.md), 2. Bad input and 3. No loss: a
single very long line. Refused at once when it is binary, refused after
64 MiB when it has no point where it can be cut, and streamed in bounded
memory, with the ids of the whole line, when it has.
"""

from __future__ import annotations

import time

import pytest

import bpe
import bpe.data.dataset
from bpe import Tokenizer
from helpers import SHAKESPEARE, cli, one_error_line, python_child as python

TEXT = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
SPECIALS = ["<|endoftext|>", "<|fim|>"]
MiB = 1 << 20


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXT, 400, special_tokens=SPECIALS, progress=False)


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
        bpe.data.dataset.write_dataset([path], tok_path, tmp_path / "ds", progress=False)
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
    (the word cut, proven in rust/split/pretokenize.rs): peak memory grows by far
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
    bpe.data.dataset.write_dataset([path], tok_path, tmp_path / "ds", val_fraction=0, block_bytes=997, progress=False,
                           allowed_special="all" if allow_special else (), disallowed_special=())
    raw = (tmp_path / "ds" / "train.bin").read_bytes()
    ids = [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    text = line + "\n" + line
    assert ids == (tok.encode(text, allowed_special="all") if allow_special else tok.encode_ordinary(text))
