"""Token datasets (bpe/data/: dataset.py writes, reading.py reads): train.bin / val.bin / meta.json, and batches.

Writing needs only the standard library; reading needs numpy and torch (the
`model` extra, which CI installs). The files are checked against the
tokenizer's own encode_ordinary: a dataset holds exactly the ids of its text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bpe
from bpe import data as bdata
from bpe.data.dataset import _split_offset

CORPORA = Path(__file__).resolve().parents[2] / "corpora"
SHAKESPEARE = CORPORA / "tinyshakespeare.txt"
MULTILINGUAL = CORPORA / "multilingual_udhr.txt"


def need_model_extra():
    """numpy and torch: skipped where absent, but CI installs them, so there a
    missing one fails."""
    for name in ("numpy", "torch"):
        try:
            __import__(name)
        except ImportError:
            if os.environ.get("CI"):
                pytest.fail(f"{name} is missing; CI installs it with pip install -e '.[test,model]'")
            pytest.skip(f"{name} is not installed (pip install -e '.[model]')")
    import numpy

    return numpy


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> Path:
    text = SHAKESPEARE.read_text(encoding="utf-8")[:200_000] + MULTILINGUAL.read_text(encoding="utf-8")[:50_000]
    path = tmp_path_factory.mktemp("tok") / "tok.bpe"
    bpe.Tokenizer.train(text, 600, progress=False).save(path)
    return path


@pytest.fixture(scope="module")
def tok(tok_path) -> bpe.Tokenizer:
    return bpe.Tokenizer.load(tok_path)


def read_ids(directory: Path, split: str) -> list[int]:
    meta = json.loads((directory / "meta.json").read_text())
    width = {"uint16": 2, "uint32": 4}[meta["dtype"]]
    raw = (directory / f"{split}.bin").read_bytes()
    return [int.from_bytes(raw[i : i + width], "little") for i in range(0, len(raw), width)]


def split_text(path: Path, train_bytes: int) -> tuple[str, str]:
    raw = path.read_bytes()
    return raw[:train_bytes].decode("utf-8"), raw[train_bytes:].decode("utf-8")


# -- writing -----------------------------------------------------------------


def test_one_file_is_split_at_a_line_start(tmp_path, tok_path, tok):
    meta = bdata.write_dataset([SHAKESPEARE], tok_path, tmp_path / "ds", progress=False)
    ds = tmp_path / "ds"
    assert sorted(p.name for p in ds.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    train_bytes = meta["splits"]["train"]["bytes"]
    size = SHAKESPEARE.stat().st_size
    assert train_bytes + meta["splits"]["val"]["bytes"] == size
    assert abs(train_bytes - 0.9 * size) < 200  # the first line start after 90%
    assert SHAKESPEARE.read_bytes()[train_bytes - 1 : train_bytes] == b"\n"
    train_text, val_text = split_text(SHAKESPEARE, train_bytes)
    assert read_ids(ds, "train") == tok.encode_ordinary(train_text)
    assert read_ids(ds, "val") == tok.encode_ordinary(val_text)
    assert meta["dtype"] == "uint16"
    assert meta["splits"]["train"]["tokens"] == len(read_ids(ds, "train"))
    assert meta["tokenizer"]["sha256"] == bdata.file_sha256(tok_path)
    assert meta["tokenizer"]["eot"] == tok.special_tokens["<|endoftext|>"]
    assert json.loads((ds / "meta.json").read_text()) == meta


@pytest.mark.parametrize("piece_bytes", [64, 1000, 7777])
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "gpt4o"])
def test_streaming_in_pieces_gives_the_ids_of_the_whole(tmp_path, piece_bytes, pattern):
    """Cutting files into small pieces (many cuts, some next to multi-byte
    characters) changes no id: the cuts are safe points."""
    text = (
        SHAKESPEARE.read_text(encoding="utf-8")[:30_000]
        + MULTILINGUAL.read_text(encoding="utf-8")[100_000:140_000]
        + "line\nЖ\nx\n2\n中\n🙂\n \nA\n\ta\n.\nb"
    )
    src = tmp_path / "mixed.txt"
    src.write_text(text, encoding="utf-8", newline="")
    tok = bpe.Tokenizer.train(text, 500, pattern=pattern, progress=False)
    tok.save(tmp_path / "t.bpe")
    meta = bdata.write_dataset([src], tmp_path / "t.bpe", tmp_path / "ds", block_bytes=piece_bytes, progress=False)
    train_text, val_text = split_text(src, meta["splits"]["train"]["bytes"])
    assert read_ids(tmp_path / "ds", "train") == tok.encode_ordinary(train_text)
    assert read_ids(tmp_path / "ds", "val") == tok.encode_ordinary(val_text)


def test_end_of_text_between_files(tmp_path, tok_path, tok):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("First document.\n" * 50, encoding="utf-8")
    b.write_text("Second one, é and 中文.\n" * 40, encoding="utf-8")
    meta = bdata.write_dataset([a, b], tok_path, tmp_path / "ds", progress=False)
    eot = tok.special_tokens["<|endoftext|>"]
    expect = {"train": [], "val": []}
    for f in (a, b):
        size = f.stat().st_size
        cut = _split_offset(str(f), size, 0.1)
        train_text, val_text = split_text(f, cut)
        for split, text in (("train", train_text), ("val", val_text)):
            if expect[split]:
                expect[split].append(eot)
            expect[split] += tok.encode_ordinary(text)
    for split in ("train", "val"):
        assert read_ids(tmp_path / "ds", split) == expect[split]
        assert meta["splits"][split]["documents"] == 2
    assert read_ids(tmp_path / "ds", "train").count(eot) == 1


def test_special_token_text_as_encode_decides(tmp_path, tok_path, tok):
    """As `Tokenizer.encode`: special-token text is an error by default
    (nothing written), ordinary text with disallowed_special=(), the special
    token with allowed_special."""
    src = tmp_path / "s.txt"
    src.write_text("a<|endoftext|>b\n" * 30, encoding="utf-8")
    eot = tok.special_tokens["<|endoftext|>"]
    with pytest.raises(ValueError, match=r'holds the special token "<\|endoftext\|>" at byte offset 1 \(line 1\)'):
        bdata.write_dataset([src], tok_path, tmp_path / "refused", progress=False)
    assert not (tmp_path / "refused").exists()
    bdata.write_dataset([src], tok_path, tmp_path / "plain", disallowed_special=(), progress=False)
    assert eot not in read_ids(tmp_path / "plain", "train")
    bdata.write_dataset([src], tok_path, tmp_path / "special", allowed_special="all", progress=False)
    assert read_ids(tmp_path / "special", "train").count(eot) > 20
    # A Tokenizer object does as well as its file; meta.json names it as told.
    meta = bdata.write_dataset([src], tok, tmp_path / "obj", allowed_special="all", progress=False,
                               tokenizer_name="mine")
    assert read_ids(tmp_path / "obj", "train") == read_ids(tmp_path / "special", "train")
    assert meta["tokenizer"]["file"] == "mine"
    assert meta["tokenizer"]["sha256"] == bdata.file_sha256(tok_path)


def test_val_fraction(tmp_path, tok_path):
    meta = bdata.write_dataset([SHAKESPEARE], tok_path, tmp_path / "ds", val_fraction=0.5, progress=False)
    size = SHAKESPEARE.stat().st_size
    assert abs(meta["splits"]["val"]["bytes"] - size / 2) < 200
    with pytest.raises(ValueError, match="val_fraction"):
        bdata.write_dataset([SHAKESPEARE], tok_path, tmp_path / "ds2", val_fraction=1.0, progress=False)
    assert not (tmp_path / "ds2").exists()


def test_split_offset_without_newlines(tmp_path):
    f = tmp_path / "one-line.txt"
    f.write_text("é" * 1000, encoding="utf-8")  # 2000 bytes, no newline
    cut = _split_offset(str(f), 2000, 0.1005)  # the target falls inside a character
    assert cut == 1800  # moved to the character boundary after it
    f.write_bytes(b"x" * 100 + b"\n" + b"y" * 100)  # a newline only before the target
    assert _split_offset(str(f), 201, 0.1) == 101


def test_dtype_for():
    assert bdata.dtype_for(256) == "uint16"
    assert bdata.dtype_for(50257) == "uint16"
    assert bdata.dtype_for(65536) == "uint16"  # largest id 65535 fits
    assert bdata.dtype_for(65537) == "uint32"
    assert bdata.dtype_for(100277) == "uint32"


@pytest.mark.parametrize("eot_id, dtype", [(65535, "uint16"), (65536, "uint32"), (200_000, "uint32")])
def test_memmap_dtype_switches_to_uint32_above_65535(tmp_path, eot_id, dtype):
    """A vocabulary whose largest id does not fit 16 bits is written as
    uint32, and the large id survives the round trip (numpy reads it back)."""
    np = need_model_extra()
    tok = bpe.Tokenizer(pattern="gpt4", special_tokens={"<|endoftext|>": eot_id}, ranks={bytes([i]): i for i in range(256)})
    assert tok.n_vocab == eot_id + 1
    tok.save(tmp_path / "big.bpe")
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("hello\nworld\n" * 20, encoding="utf-8")
    b.write_text("second\nfile\n" * 20, encoding="utf-8")
    meta = bdata.write_dataset([a, b], tmp_path / "big.bpe", tmp_path / "ds", progress=False)
    assert meta["dtype"] == dtype
    train = bdata.load_split(tmp_path / "ds", "train")
    assert train.dtype == np.dtype(dtype)
    assert (tmp_path / "ds" / "train.bin").stat().st_size == len(train) * train.dtype.itemsize
    ids = train.tolist()
    assert ids.count(eot_id) == 1
    assert ids == read_ids(tmp_path / "ds", "train")
    assert tok.decode(ids, errors="strict").startswith("hello\nworld\n")


def test_no_end_of_text_token(tmp_path):
    tok = bpe.Tokenizer.train(SHAKESPEARE.read_text(encoding="utf-8")[:50_000], 300, special_tokens=(), progress=False)
    tok.save(tmp_path / "n.bpe")
    a = tmp_path / "a.txt"
    a.write_text("one\ntwo\n" * 30, encoding="utf-8")
    meta = bdata.write_dataset([a], tmp_path / "n.bpe", tmp_path / "one", progress=False)  # one file: fine
    assert meta["tokenizer"]["eot"] is None
    with pytest.raises(ValueError, match="no <\\|endoftext\\|>.*--no-special"):
        bdata.write_dataset([a, a], tmp_path / "n.bpe", tmp_path / "two", progress=False)
    assert not (tmp_path / "two").exists()


# -- failures leave nothing that looks complete -----------------------------------


def test_failure_removes_what_it_created(tmp_path, tok_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n" * 100 + b"\xff")
    with pytest.raises(ValueError, match=r"bad.txt is not valid UTF-8 at byte offset 500"):
        bdata.write_dataset([SHAKESPEARE, bad], tok_path, tmp_path / "ds", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_failure_keeps_an_existing_dataset(tmp_path, tok_path):
    ds = tmp_path / "ds"
    bdata.write_dataset([SHAKESPEARE], tok_path, ds, progress=False)
    before = {p.name: p.read_bytes() for p in ds.iterdir()}
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"x\n" * 10 + b"\xc3(")
    with pytest.raises(ValueError, match="offset 20"):
        bdata.write_dataset([SHAKESPEARE, bad], tok_path, ds, progress=False)
    assert {p.name: p.read_bytes() for p in ds.iterdir()} == before


def test_out_must_be_a_directory(tmp_path, tok_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="is not a directory: a dataset is a directory"):
        bdata.write_dataset([SHAKESPEARE], tok_path, f, progress=False)
    with pytest.raises(ValueError, match="does not exist"):
        bdata.write_dataset([SHAKESPEARE], tok_path, tmp_path / "a" / "b", progress=False)


def test_reader_refuses_incomplete_datasets(tmp_path, tok_path):
    need_model_extra()
    ds = tmp_path / "ds"
    bdata.write_dataset([SHAKESPEARE], tok_path, ds, progress=False)
    raw = (ds / "val.bin").read_bytes()
    (ds / "val.bin").write_bytes(raw[:-2])  # a truncated file
    with pytest.raises(bdata.DatasetError, match="val.bin has .* bytes.*re-run `bpe encode"):
        bdata.load_split(ds, "train")
    (ds / "meta.json").unlink()  # as an interrupted write leaves it
    with pytest.raises(bdata.DatasetError, match="meta.json is missing: the dataset is incomplete"):
        bdata.load_split(ds, "val")
    with pytest.raises(bdata.DatasetError, match="is not a dataset"):
        bdata.load_meta(tmp_path)


# -- reading ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, tok_path) -> Path:
    ds = tmp_path_factory.mktemp("data") / "ds"
    bdata.write_dataset([SHAKESPEARE], tok_path, ds, progress=False)
    return ds


def test_batches_are_shifted_by_one(dataset):
    np = need_model_extra()
    import torch

    train = bdata.load_split(dataset, "train")
    g = torch.Generator().manual_seed(0)
    x, y = bdata.get_batch(train, 8, 32, generator=g)
    assert x.shape == y.shape == (8, 32)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(y[:, :-1], x[:, 1:])
    # Each row is a real window of the data, and y holds the ids that follow x.
    ids = np.asarray(train, dtype=np.int64)
    for row_x, row_y in zip(x.numpy(), y.numpy()):
        starts = np.flatnonzero(ids[: len(ids) - 32] == row_x[0])
        assert any((ids[s : s + 32] == row_x).all() and (ids[s + 1 : s + 33] == row_y).all() for s in starts)
    # The same generator state gives the same batch.
    x2, y2 = bdata.get_batch(train, 8, 32, generator=torch.Generator().manual_seed(0))
    assert torch.equal(x, x2) and torch.equal(y, y2)
    with pytest.raises(ValueError, match="smaller --block-size"):
        bdata.get_batch(train[:10], 2, 32)


def test_eval_windows(dataset):
    need_model_extra()
    val = bdata.load_split(dataset, "val")
    all_windows = bdata.eval_windows(val, 64)
    assert all_windows == list(range(0, len(all_windows) * 64, 64))
    assert all_windows[-1] + 65 <= len(val)
    some = bdata.eval_windows(val, 64, 10)
    assert len(some) == 10 and some == sorted(set(some)) and set(some) <= set(all_windows)


def test_unigram_baseline(dataset):
    np = need_model_extra()
    import math
    from collections import Counter

    meta = bdata.load_meta(dataset)
    train = bdata.load_split(dataset, "train").tolist()
    val = bdata.load_split(dataset, "val").tolist()
    n_vocab = meta["tokenizer"]["n_vocab"]
    counts = Counter(train)
    total = len(train) + n_vocab
    nats = -sum(math.log((counts[i] + 1) / total) for i in val) / len(val)
    got = bdata.unigram_baseline(dataset)
    assert got["nats_per_token"] == pytest.approx(nats, rel=1e-9)
    assert got["bits_per_byte"] == pytest.approx(
        nats * len(val) / (meta["splits"]["val"]["bytes"] * math.log(2)), rel=1e-9
    )
    assert 0 < got["bits_per_byte"] < 8


def test_import_bpe_imports_neither_torch_nor_numpy():
    code = (
        "import sys, bpe, bpe.cli, bpe.data, bpe.gpt.train\n"
        "bpe.cli.build_parser()\n"
        "bad = [m for m in ('torch', 'numpy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
