"""Arrow sources (bpe/sources/arrow.py, rust/input/arrow.rs, rust/py/arrow.rs)
against the plain Python path: the records of a pyarrow Table, a Parquet
file or a HF dataset count and encode exactly as the same records given as
a list of str, whatever their layout (sliced, large_string, nulls, bad
bytes), and broken input is a one-line error naming file and row."""

from __future__ import annotations

import json
import os
import random
import tempfile
import warnings

import pytest
from hypothesis import given, strategies as st

import bpe
from bpe import _core
from bpe.sources import arrow as A
from conftest import CORPORA

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'bpe[data]')")
pq = pytest.importorskip("pyarrow.parquet")


def records_of(text: str, seed: int = 0, low: int = 1, high: int = 3000) -> list[str]:
    """`text` cut into records of random lengths, anywhere (mid-word too):
    records are documents of their own, never joined."""
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(text):
        n = rng.randint(low, high)
        out.append(text[at:at + n])
        at += n
    return out


@pytest.fixture(scope="module")
def records() -> list[str]:
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:200_000]
    text += (CORPORA / "multilingual_udhr.txt").read_text()[:100_000]
    rs = records_of(text)
    rs[5:5] = ["", "<|endoftext|>", "   ", "\n\n"]
    return rs


@pytest.fixture(scope="module")
def tok(records) -> bpe.Tokenizer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bpe.Tokenizer.train(records, 700)


def trained(feed, pattern=bpe.GPT4_PATTERN, size=600):
    """The merges and vocabulary of a trainer fed by `feed(trainer)`."""
    trainer = _core.Trainer(pattern)
    feed(trainer)
    n_chunks = trainer.n_chunks()
    merges, vocab = trainer.train(size - 1, False, ["<|endoftext|>"])
    return n_chunks, list(merges.items()), vocab


def write_parquet(path, records, **kw) -> str:
    pq.write_table(pa.table({"id": list(range(len(records))), "text": records}), path, **kw)
    return str(path)


# -- Training ---------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [bpe.GPT4_PATTERN, bpe.GPT2_PATTERN])
def test_training_from_arrow_equals_training_on_the_list(records, tmp_path, pattern):
    want = trained(lambda t: t.feed_texts(records), pattern)
    table = pa.table({"text": records})
    # Small batches: many calls, records never joined across them.
    assert trained(lambda t: A.feed_arrow(t, table, batch_rows=37), pattern) == want
    assert trained(lambda t: A.feed_arrow(t, table.column("text")), pattern) == want
    path = write_parquet(tmp_path / "c.parquet", records, row_group_size=500)
    assert trained(lambda t: A.feed_arrow(t, path), pattern) == want
    assert trained(lambda t: A.feed_arrow(t, pa.table({"text": pa.array(records, pa.large_string())})), pattern) == want


def test_tokenizer_trained_from_parquet_equals_the_list(records, tmp_path):
    path = write_parquet(tmp_path / "c.parquet", records, compression="zstd")
    from_list = bpe.Tokenizer.train(records, 600)
    _, merges, vocab = trained(lambda t: A.feed_arrow(t, path))
    assert merges == list(from_list.merges.items())
    assert vocab == {i: from_list.vocab[i] for i in vocab}


def test_progress_reports_rows(records):
    seen = []
    A.feed_arrow(_core.Trainer(bpe.GPT4_PATTERN), pa.table({"text": records}), batch_rows=50, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == len(records) and len(seen) == -(-len(records) // 50)


def test_nested_column(records):
    table = pa.table({"doc": pa.StructArray.from_arrays([pa.array(records), pa.array(range(len(records)))], ["text", "n"])})
    want = trained(lambda t: t.feed_texts(records))
    assert trained(lambda t: A.feed_arrow(t, table, column="doc.text")) == want
    with pytest.raises(ValueError, match="column 'doc' has no field 'body'; its fields: text, n"):
        A.feed_arrow(_core.Trainer(bpe.GPT4_PATTERN), table, column="doc.body")


# -- Encoding ---------------------------------------------------------------------


def encode_to_file(tok, source, fmt, tmp_path, **kw):
    path = tmp_path / f"out.{fmt}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        result = A.encode_arrow_to_fd(tok, source, fd, fmt, **kw)
    finally:
        os.close(fd)
    return result, path.read_bytes()


@pytest.mark.parametrize("fmt", ["ids", "json", "binary", "count"])
def test_every_format_holds_the_ids_of_each_record(tok, records, tmp_path, fmt):
    source = pa.table({"text": records})
    want = [tok.encode(r) if "<|endoftext|>" not in r else None for r in records]
    # The special token's text is disallowed by default: that record is bad.
    with pytest.raises(ValueError, match=r"the pyarrow Table, row 6: the record holds the special token"):
        encode_to_file(tok, source, fmt, tmp_path)
    sep = tok.special_tokens["<|endoftext|>"]
    with pytest.warns(A.SkippedRecordsWarning, match=r"skipped 1 bad record\(s\)"):
        (n, ids, skipped), out = encode_to_file(
            tok, source, fmt, tmp_path, skip_bad=True, separator=sep, batch_rows=41, width=2)
    good = [w for w in want if w is not None]
    assert (n, skipped) == (len(good), 1)
    if fmt == "ids":
        assert out.decode() == "".join(" ".join(map(str, w)) + "\n" for w in good)
    elif fmt == "json":
        assert [json.loads(line) for line in out.decode().splitlines()] == good
    else:
        # The separator goes between records, and counts (as `bpe info` counts it).
        flat = [i for k, w in enumerate(good) for i in ([sep] if k else []) + w]
        assert out == (b"".join(i.to_bytes(2, "little") for i in flat) if fmt == "binary" else b"")
    assert ids == (len(flat) if fmt in ("binary", "count") else sum(map(len, good)))
    # Allowed, the special token encodes as its id, as `encode` does.
    (n, ids, skipped), out = encode_to_file(tok, source, "json", tmp_path, allowed_special="all")
    assert [json.loads(line) for line in out.decode().splitlines()] == [tok.encode(r, allowed_special="all") for r in records]


def test_count_tokens(tok, records):
    assert A.count_arrow_tokens(tok, pa.table({"text": records}), disallowed_special=()) == (
        len(records), sum(len(tok.encode(r, disallowed_special=())) for r in records), 0)


def test_sliced_large_string_and_chunked_arrays(tok, records, tmp_path):
    arr = pa.array(records, pa.large_string())
    part = arr.slice(7, 300)  # offset != 0
    assert part.offset == 7
    chunked = pa.chunked_array([pa.array(records[:100]).slice(3), pa.array(records[100:200]).slice(3, 90)])
    for source, want in [(part, records[7:307]), (chunked, records[3:100] + records[103:193])]:
        _, out = encode_to_file(tok, source, "json", tmp_path, disallowed_special=())
        assert [json.loads(line) for line in out.decode().splitlines()] == [tok.encode(r, disallowed_special=()) for r in want]
        assert trained(lambda t: A.feed_arrow(t, source)) == trained(lambda t: t.feed_texts(want))


# -- Bad records ----------------------------------------------------------------


def test_nulls_are_errors_or_skipped_and_counted(tok, tmp_path):
    texts = ["first", None, "third", None, "fifth"]
    table = pa.table({"text": texts})
    t = _core.Trainer(bpe.GPT4_PATTERN)
    with pytest.raises(ValueError) as e:
        A.feed_arrow(t, table, name="shard.parquet")
    assert str(e.value) == ("shard.parquet, row 1: the record is null, not a text; fix or drop that row, "
                            "or pass skip_bad=True to skip bad records")
    with pytest.warns(A.SkippedRecordsWarning, match=r"skipped 2 bad record\(s\).*the first: shard.parquet, row 1"):
        assert A.feed_arrow(t, table, name="shard.parquet", skip_bad=True) == 2
    with pytest.warns(A.SkippedRecordsWarning):
        from_arrow = trained(lambda t: A.feed_arrow(t, table, skip_bad=True))
    assert from_arrow == trained(lambda t: t.feed_texts(["first", "third", "fifth"]))
    # Rows count on across batches; a slice's rows count from its start.
    with pytest.raises(ValueError, match=r"^the pyarrow Table, row 3: the record is null"):
        A.feed_arrow(t, pa.table({"text": ["a", "b", "c", None]}), batch_rows=2)
    with pytest.raises(ValueError, match=r"^the pyarrow Table, row 1: the record is null"):
        A.feed_arrow(t, table.slice(2), batch_rows=1)  # (the table's row 3)
    with pytest.warns(A.SkippedRecordsWarning):
        (n, ids, skipped), out = encode_to_file(tok, table, "ids", tmp_path, skip_bad=True)
    assert (n, skipped) == (3, 2) and out.decode().splitlines() == [" ".join(map(str, tok.encode(x))) for x in ("first", "third", "fifth")]


def bad_utf8_array(large=False):
    """A string array holding bytes that are not UTF-8 (pyarrow builds it
    from raw buffers without checking)."""
    data = b"good" + b"ok\xff\xfe" + "日本".encode()
    width = 8 if large else 4
    offsets = b"".join(n.to_bytes(width, "little") for n in (0, 4, 8, 14))
    t = pa.large_string() if large else pa.string()
    return pa.Array.from_buffers(t, 3, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


@pytest.mark.parametrize("large", [False, True])
def test_bad_utf8_is_a_bad_record(tok, tmp_path, large):
    arr = bad_utf8_array(large)
    t = _core.Trainer(bpe.GPT4_PATTERN)
    with pytest.raises(ValueError, match=r"^x.parquet, row 1: the record is not valid UTF-8 at byte 2; fix or drop"):
        A.feed_arrow(t, arr, name="x.parquet")
    with pytest.warns(A.SkippedRecordsWarning):
        assert A.feed_arrow(t, arr, skip_bad=True) == 1
    with pytest.warns(A.SkippedRecordsWarning):
        (n, _, skipped), out = encode_to_file(tok, arr, "json", tmp_path, skip_bad=True)
    assert (n, skipped) == (2, 1) and [json.loads(x) for x in out.decode().splitlines()] == [tok.encode("good"), tok.encode("日本")]
    # Binary columns are read as text, each record checked.
    binary = pa.array([b"abc", b"\xc3("], pa.binary())
    with pytest.raises(ValueError, match="row 1: the record is not valid UTF-8 at byte 0"):
        A.feed_arrow(t, binary)


def test_corrupt_buffers_are_an_error_not_a_crash():
    # Offsets past the data, handed to the core directly (pyarrow would
    # refuse to build such an array; a buggy producer might not).
    t = _core.Trainer(bpe.GPT4_PATTERN)
    offsets = b"".join(n.to_bytes(4, "little") for n in (0, 3, 99))
    with pytest.raises(ValueError, match=r"^src, rows 10\.\.: the array's offsets are corrupt: its records end at byte 99, past its 5 bytes"):
        t.feed_arrow((None, pa.py_buffer(offsets), pa.py_buffer(b"abcde"), 4, 0, 2), "src", 10, False)
    falling = b"".join(n.to_bytes(4, "little") for n in (0, 3, 1))
    with pytest.raises(ValueError, match="offsets are corrupt: they fall from 3 to 1"):
        t.feed_arrow((None, falling, b"abcde", 4, 0, 2), "src", 0, True)
    with pytest.raises(ValueError, match="too few for 4 offsets"):
        t.feed_arrow((None, offsets, b"abcde", 4, 1, 2), "src", 0, False)
    with pytest.raises(ValueError, match="validity bitmap has 0 bytes"):
        t.feed_arrow((b"", offsets, b"abcde", 4, 0, 2), "src", 0, False)
    with pytest.raises(ValueError, match="4 or 8 bytes wide, not 2"):
        t.feed_arrow((None, offsets, b"abcde", 2, 0, 2), "src", 0, False)
    assert t.n_chunks() == 0


# -- Sources and their errors -----------------------------------------------------


def test_is_arrow_source(tmp_path):
    table = pa.table({"text": ["a"]})
    for obj in [table, table.to_batches()[0], table.to_reader(), table.column("text"), pa.array(["a"]),
                pa.array([b"a"], pa.large_binary())]:
        assert A.is_arrow_source(obj), obj
    for obj in ["text", ["a"], pa.array([1, 2]), None, tmp_path]:
        assert not A.is_arrow_source(obj), obj
    assert A.is_parquet_path("x/y.parquet") and A.is_parquet_path(tmp_path / "a.PQ") and not A.is_parquet_path("a.txt")


def test_readers_and_record_batches(records):
    table = pa.table({"text": records})
    want = trained(lambda t: t.feed_texts(records))
    assert trained(lambda t: A.feed_arrow(t, table.to_reader(max_chunksize=100))) == want
    assert trained(lambda t: A.feed_arrow(t, table.combine_chunks().to_batches()[0])) == want


def test_missing_column_names_the_columns(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", ["a", "b"])
    t = _core.Trainer(bpe.GPT4_PATTERN)
    with pytest.raises(ValueError) as e:
        A.feed_arrow(t, path, column="body")
    assert str(e.value) == f"{path} has no column 'body'; its columns: id, text (pass column=)"
    with pytest.raises(ValueError, match=r"the pyarrow Table has no column 'body'; its columns: id, text"):
        A.feed_arrow(t, pq.read_table(path), column="body")
    with pytest.raises(ValueError, match=r"column 'id' holds int64, not text"):
        A.feed_arrow(t, path, column="id")


def test_corrupt_or_missing_parquet_is_one_line_naming_the_file(records, tmp_path):
    path = write_parquet(tmp_path / "c.parquet", records)
    data = open(path, "rb").read()
    t = _core.Trainer(bpe.GPT4_PATTERN)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    scrambled = tmp_path / "scrambled.parquet"
    # The footer intact, the pages overwritten: the error comes while reading.
    scrambled.write_bytes(data[:4] + bytes(len(data) // 2) + data[4 + len(data) // 2:])
    for bad in [truncated, scrambled, tmp_path / "missing.parquet"]:
        with pytest.raises(ValueError) as e:
            A.feed_arrow(t, str(bad))
        message = str(e.value)
        assert message.startswith(f"cannot read {bad} as Parquet: ") and "\n" not in message, message


def test_missing_pyarrow_is_a_one_line_import_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *args, **kw):
        if name.split(".")[0] == "pyarrow":
            raise ImportError("No module named 'pyarrow'")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(ImportError, match=r"^reading Parquet and Arrow data needs pyarrow: pip install 'bpe\[data\]'$"):
        A.feed_arrow(_core.Trainer(bpe.GPT4_PATTERN), "x.parquet")


def test_huggingface_datasets(records, tok, tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed: pip install datasets")
    ds = datasets.Dataset.from_dict({"text": records, "n": list(range(len(records)))})
    want = trained(lambda t: t.feed_texts(records))
    assert A.is_arrow_source(ds) and A.is_arrow_source(ds.to_iterable_dataset())
    assert trained(lambda t: A.feed_arrow(t, ds)) == want
    assert trained(lambda t: A.feed_arrow(t, ds.to_iterable_dataset(), batch_rows=64)) == want
    # An index mapping (select, shuffle) is honoured: rows in its order.
    picked = ds.select(range(len(records) - 1, -1, -1))
    assert trained(lambda t: A.feed_arrow(t, picked)) == trained(lambda t: t.feed_texts(records[::-1]))
    _, out = encode_to_file(tok, picked.select(range(50)), "json", tmp_path, disallowed_special=())
    assert [json.loads(x) for x in out.decode().splitlines()] == [tok.encode(r, disallowed_special=()) for r in records[::-1][:50]]
    with pytest.raises(ValueError, match=r"the datasets Dataset has no column 'body'; its columns: text, n"):
        A.feed_arrow(_core.Trainer(bpe.GPT4_PATTERN), ds, column="body")


# -- Any records at all ---------------------------------------------------------------

_texts = st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=40) | st.just(""), max_size=30)


@given(texts=_texts, start=st.integers(0, 5), large=st.booleans())
def test_any_records_count_and_encode_as_a_list(tok, texts, start, large):
    arr = pa.array(texts, pa.large_string() if large else pa.string()).slice(min(start, len(texts)))
    texts = texts[min(start, len(texts)):]
    t1, t2 = _core.Trainer(bpe.GPT4_PATTERN), _core.Trainer(bpe.GPT4_PATTERN)
    A.feed_arrow(t1, arr, batch_rows=7)
    t2.feed_texts(texts)
    assert t1.train(300, False) == t2.train(300, False)
    with tempfile.TemporaryFile() as f:
        records, ids, skipped = A.encode_arrow_to_fd(tok, arr, f.fileno(), "json", disallowed_special=(), batch_rows=7)
        f.seek(0)
        lines = f.read().decode().splitlines()
    assert [json.loads(x) for x in lines] == [tok.encode(x, disallowed_special=()) for x in texts]
    assert (records, ids, skipped) == (len(texts), sum(len(tok.encode(x, disallowed_special=())) for x in texts), 0)
