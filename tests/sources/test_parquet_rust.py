"""Parquet files read in Rust (rust/input/parquet.rs, through
`Trainer.feed_records`, which `Tokenizer.train` and `bpe train` use for
files named .parquet) against the same records given as a list of str and
read by pyarrow (bpe/sources/arrow.py): the same counts whatever the
file's layout (row groups, codecs, dictionary or plain pages, nulls, nested
columns, large_string), and broken input is a one-line error naming the
file and the row (from 0, as pyarrow numbers them)."""

from __future__ import annotations

import random
import warnings

import pytest

import bpe
from bpe import _core
from bpe.sources import arrow as A
from bpe.sources import corpus
from conftest import CORPORA

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'bpe[data]')")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def records() -> list[str]:
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:120_000]
    text += (CORPORA / "multilingual_udhr.txt").read_text()[:60_000]
    rng = random.Random(7)
    out, at = [], 0
    while at < len(text):
        n = rng.randint(1, 2000)
        out.append(text[at:at + n])
        at += n
    out[3:3] = ["", "<|endoftext|>", "   ", "\n\n", "é" * 3000]
    return out


def trained(feed, size=500):
    """The chunk count, merges and vocabulary of a trainer fed by `feed`."""
    trainer = _core.Trainer(bpe.GPT4_PATTERN)
    feed(trainer)
    n_chunks = trainer.n_chunks()
    merges, vocab = trainer.train(size - 1, False, [])
    return n_chunks, list(merges.items()), vocab


def rust(paths, field=("text",), skip_bad=False):
    """A feed through the Rust reader; it returns the rows skipped per file."""
    def feed(t):
        feed.skipped = t.feed_records([str(p) for p in paths], list(field), skip_bad, False)
    return feed


@pytest.mark.parametrize("options", [
    {"row_group_size": 97},
    {"compression": "zstd", "row_group_size": 1000},
    {"compression": "gzip", "use_dictionary": False},
    {"compression": "none", "data_page_size": 1024},
    {"compression": "lz4", "data_page_version": "2.0"},
    {"compression": "brotli"},
])
def test_rust_reads_what_pyarrow_reads(records, tmp_path, options):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": list(range(len(records))), "text": records}), path, **options)
    want = trained(lambda t: t.feed_texts(records))
    assert trained(lambda t: A.feed_arrow(t, str(path))) == want
    assert trained(rust([path])) == want


def test_large_strings_nested_columns_and_many_files(records, tmp_path):
    half = len(records) // 2
    a, b = tmp_path / "a.parquet", tmp_path / "B.PARQUET"
    pq.write_table(pa.table({"text": pa.array(records[:half], pa.large_string())}), a)
    meta = pa.array([{"body": r, "n": i} for i, r in enumerate(records[half:])])
    pq.write_table(pa.table({"meta": meta}), b)
    want = trained(lambda t: t.feed_texts(records))
    # One file per column layout: the field names the nested one.
    first = trained(rust([a]))
    assert first == trained(lambda t: t.feed_texts(records[:half]))
    assert trained(rust([b], ("meta", "body"))) == trained(lambda t: t.feed_texts(records[half:]))
    both = tmp_path / "both"
    both.mkdir()
    pq.write_table(pa.table({"text": records[:half]}), both / "1.parquet")
    pq.write_table(pa.table({"text": records[half:]}), both / "2.parquet", row_group_size=50)
    assert trained(lambda t: corpus.feed(t, [both], False)) == want


def test_the_tokenizer_and_the_cli_train_from_parquet_without_pyarrow(records, tmp_path, monkeypatch):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": records}), path, row_group_size=300)
    want = bpe.Tokenizer.train(records, 400, progress=False)
    # pyarrow is not asked for (it would raise here).
    monkeypatch.setattr(A, "pyarrow", lambda: pytest.fail("pyarrow was used"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert bpe.Tokenizer.train(path, 400, progress=False) == want


def test_nulls_and_bad_bytes_are_named_by_row_or_skipped(tmp_path):
    texts = ["first", None, "third"] * 40  # rows 1, 4, 7, ... are null
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": texts}), path, row_group_size=7)
    t = _core.Trainer(bpe.GPT4_PATTERN)
    with pytest.raises(ValueError) as e:
        t.feed_records([str(path)], ["text"], False, False)
    assert str(e.value) == (f"{path}, row 1: the record is null, not a text; fix or drop that row, or pass "
                            "--skip-bad (skip_bad=True) to skip bad records and count them")
    feed = rust([path], skip_bad=True)
    assert trained(feed) == trained(lambda t: t.feed_texts([x for x in texts if x is not None]))
    assert feed.skipped == [40]
    # Bytes that are not UTF-8 in a string column (pyarrow writes them unchecked).
    data = b"good" + b"ok\xff\xfe" + "日本".encode()
    offsets = b"".join(n.to_bytes(4, "little") for n in (0, 4, 8, 14))
    bad = pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    path = tmp_path / "u.parquet"
    pq.write_table(pa.table({"text": bad}), path)
    with pytest.raises(ValueError, match=rf"^{path}, row 1: the record is not valid UTF-8 at byte 2; fix or drop"):
        t.feed_records([str(path)], ["text"], False, False)
    feed = rust([path], skip_bad=True)
    assert trained(feed) == trained(lambda t: t.feed_texts(["good", "日本"]))
    assert feed.skipped == [1]


def test_wrong_columns_and_broken_files_are_one_line_naming_the_file(records, tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": list(range(len(records))), "text": records,
                             "raw": [r.encode() for r in records], "tags": [[r] for r in records]}), path)
    t = _core.Trainer(bpe.GPT4_PATTERN)

    def error(p, field="text"):
        with pytest.raises(ValueError) as e:
            t.feed_records([str(p)], field.split("."), False, False)
        message = str(e.value)
        assert "\n" not in message and str(p) in message, message
        return message

    leaf = pq.ParquetFile(path).schema.column(3).path  # the list's strings ("tags.list.element")
    assert error(path, "body").startswith(f'{path} has no column "body"; its columns: id, text, raw, {leaf} (')
    assert 'column "id" holds' in error(path, "id") and "not text" in error(path, "id")
    assert 'column "raw" holds binary, not text' in error(path, "raw")
    assert f'column "{leaf}" holds a list, not text' in error(path, leaf)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    scrambled = tmp_path / "scrambled.parquet"
    # The footer intact, the pages overwritten: the error comes while reading.
    scrambled.write_bytes(data[:4] + bytes(len(data) // 2) + data[4 + len(data) // 2:])
    for bad in [truncated, scrambled, tmp_path / "missing.parquet"]:
        assert error(bad).startswith(f"cannot read {bad} as Parquet: ")
    assert t.n_chunks() == 0  # nothing counted from a file that failed


@pytest.mark.parametrize("fmt", ["ids", "numpy", "count"])
def test_encoding_parquet_in_rust_writes_what_pyarrow_writes(records, tmp_path, fmt):
    """`bpe encode` / `bpe info` (bpe/data/streams.py) read .parquet files in
    Rust as records: the same ids, documents and separators as the pyarrow
    path (`bpe.sources.arrow.encode_arrow_to_fd`) writes."""
    import os

    from bpe.data import streams

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = bpe.Tokenizer.train(records, 400, progress=False)
    path = tmp_path / "c.parquet"
    clean = [r for r in records if "<|endoftext|>" not in r]
    pq.write_table(pa.table({"text": clean}), path, row_group_size=64)

    def written(encode):
        out = tmp_path / f"out-{encode.__name__}.{fmt}"
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            result = encode(fd)
        finally:
            os.close(fd)
        return result, out.read_bytes()

    def by_rust(fd):
        monkey = A.pyarrow  # the Rust path never asks for pyarrow
        A.pyarrow = lambda: pytest.fail("pyarrow was used")
        try:
            done = streams.encode_to_fd(tok, [str(path)], fd, fmt)
        finally:
            A.pyarrow = monkey
        return done.documents, done.ids

    def by_pyarrow(fd):
        core_fmt = "binary" if fmt == "numpy" else fmt
        width = streams._width(tok)
        separator = tok.special_tokens.get("<|endoftext|>") if fmt == "numpy" else None
        if fmt == "numpy":
            os.write(fd, streams.npy_header(width, 0))
        records_, ids, _ = A.encode_arrow_to_fd(tok, str(path), fd, core_fmt, separator=separator, width=width)
        if fmt == "numpy":  # the header's count, as encode_to_fd writes it
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, streams.npy_header(width, ids))
        return [records_], [ids]

    (docs, ids), out = written(by_rust)
    assert docs == [len(clean)]
    assert ((docs, ids), out) == written(by_pyarrow)
    if fmt == "ids":
        assert out.decode().splitlines() == [" ".join(map(str, tok.encode(r))) for r in clean]
