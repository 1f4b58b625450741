"""Corpora as people hold them (bpe/sources/paths.py, rust/input/records.rs,
rust/input/mod.rs): JSON Lines records, compressed streams, directories and
globs, for training, encoding and counting, against the same records given
to the Python API as a list of str; and bad records, named or skipped."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe.data import streams
from bpe.sources.paths import SourceOptions

CORPORA = Path(__file__).resolve().parents[2] / "corpora"


def records() -> list[str]:
    text = (CORPORA / "tinyshakespeare.txt").read_text(encoding="utf-8")[:150_000]
    text += (CORPORA / "multilingual_udhr.txt").read_text(encoding="utf-8")[:60_000]
    return [r for r in text.split("\n\n")]


def write_jsonl(path: Path, texts, *, field="text", opener=open, **dumps):
    with opener(path, "wt", encoding="utf-8") as f:
        for k, t in enumerate(texts):
            record = {"id": k, "meta": {"url": f"https://x/{k}", "tags": ["a", {"b": None}]}}
            if "." in field:
                outer, inner = field.split(".")
                record[outer] = {inner: t}
            else:
                record[field] = t
            f.write(json.dumps(record, **dumps) + "\n")


def zstd(path: Path, raw: bytes) -> bool:
    """Writes a .zst with the zstd program or module, if either is here."""
    try:
        import zstandard

        path.write_bytes(zstandard.ZstdCompressor().compress(raw))
        return True
    except ImportError:
        pass
    exe = shutil.which("zstd")
    if exe is None:
        return False
    path.write_bytes(subprocess.run([exe, "-c", "-q"], input=raw, capture_output=True, check=True).stdout)
    return True


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> tuple[Path, list[str]]:
    """A directory of mixed shards, and every document in it in the order of
    its sorted file names."""
    d = tmp_path_factory.mktemp("shards")
    rs = records()
    parts = [rs[i::7] for i in range(7)]
    write_jsonl(d / "a.jsonl", parts[0])
    write_jsonl(d / "b.jsonl.gz", parts[1], opener=gzip.open, ensure_ascii=False)
    write_jsonl(d / "c.ndjson.xz", parts[2], opener=lzma.open)
    (d / "sub").mkdir()
    with bz2.open(d / "sub" / "d.txt.bz2", "wt", encoding="utf-8") as f:
        f.write("".join(parts[3]))
    raw = "".join(json.dumps({"text": t}) + "\n" for t in parts[4]).encode()
    if not zstd(d / "sub" / "e.jsonl.zst", raw):
        (d / "sub" / "e.jsonl").write_bytes(raw)
    (d / ".hidden.txt").write_text("never read")
    with gzip.open(d / "sub" / "f.txt.gz", "wt", encoding="utf-8") as f:
        f.write("".join(parts[5]))
    docs = parts[0] + parts[1] + parts[2] + ["".join(parts[3])] + parts[4] + ["".join(parts[5])]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # the `data` extra: without it, no Parquet shard
        return d, docs
    pq.write_table(pa.table({"id": list(range(len(parts[6]))), "text": parts[6]}), d / "sub" / "g.parquet",
                   compression="zstd", row_group_size=100)
    return d, docs + parts[6]


def test_training_on_a_directory_of_shards_equals_training_on_the_records(shards):
    d, docs = shards
    want = bpe.Tokenizer.train(docs, 700, progress=False)
    assert bpe.Tokenizer.train(Path(d), 700, progress=False) == want
    # The same through the command line, with a glob for part of it.
    out = d.parent / "cli.bpe"
    ok = subprocess.run([sys.executable, "-m", "bpe", "train", str(d / "*.*"), str(d / "sub"), "--vocab", "700",
                         "-o", str(out), "-q"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert bpe.Tokenizer.load(out) == want


def test_encoding_and_counting_records(shards, tmp_path):
    d, docs = shards
    tok = bpe.Tokenizer.train(docs[:50], 400, progress=False)
    paths = bpe.sources.paths.expand([d])
    eot = tok.special_tokens["<|endoftext|>"]
    want = [tok.encode(t, disallowed_special=()) for t in docs]
    for fmt in ("ids", "json", "numpy"):
        out = tmp_path / f"out.{fmt}"
        with open(out, "wb") as f:
            done = streams.encode_to_fd(tok, paths, f.fileno(), fmt)
        if fmt == "ids":
            assert out.read_text().splitlines() == [" ".join(map(str, w)) for w in want]
        elif fmt == "json":
            assert [json.loads(line) for line in out.read_text().splitlines()] == want
        else:
            body = out.read_bytes()[128:]
            flat = [int.from_bytes(body[i : i + 2], "little") for i in range(0, len(body), 2)]
            assert flat == [i for k, w in enumerate(want) for i in ([eot] if k else []) + w]
        assert sum(done.documents) == len(docs)
    counted = streams.count_tokens(tok, paths)
    assert sum(counted.ids) == sum(map(len, want)) and sum(counted.documents) == len(docs)


def test_nested_field_and_stdin(tmp_path):
    texts = ["alpha beta", "gamma\ndelta", "ünïcödé ✓"]
    path = tmp_path / "n.jsonl"
    write_jsonl(path, texts, field="meta2.body")
    tok = bpe.Tokenizer.train(texts * 20, 300, progress=False)
    assert bpe.Tokenizer.train(path, 300, progress=False, text_field="meta2.body") == tok
    run = subprocess.run([sys.executable, "-m", "bpe", "encode", "-t", "gpt2", "-", "--input-format", "jsonl",
                          "--text-field", "meta2.body", "--format", "json"], input=path.read_bytes(),
                         capture_output=True, env=dict(os.environ))
    if b"tiktoken" in run.stderr:
        pytest.skip("tiktoken is not installed")
    assert run.returncode == 0, run.stderr
    gpt2 = bpe.Tokenizer.from_tiktoken("gpt2")
    assert [json.loads(x) for x in run.stdout.splitlines()] == [gpt2.encode(t) for t in texts]


BAD = [
    ('{"txt": "x"}', 'no field "text"'),
    ('{"text": 5}', 'field "text" is a number, not a string'),
    ('{"text": null}', 'field "text" is null, not a string'),
    ('{"text": ["a"]}', 'field "text" is an array, not a string'),
    ("not json", "not valid JSON"),
    ('["text"]', 'not a JSON object with a string field "text" (found an array on the way)'),
    ('{"text": "a"} {"text": "b"}', "not one JSON object"),
]


@pytest.mark.parametrize("line, why", BAD)
def test_a_bad_record_is_named_or_skipped(line, why, tmp_path):
    good = ['{"text": "first record"}', '{"text": "second"}']
    path = tmp_path / "bad.jsonl"
    path.write_text(good[0] + "\n" + line + "\n" + good[1] + "\n", encoding="utf-8")
    offset = len(good[0]) + 1
    with pytest.raises(ValueError) as e:
        bpe.Tokenizer.train(path, 260, progress=False)
    assert f"{path}: line 2 (byte offset {offset}): {why}" in str(e.value)
    assert "--skip-bad" in str(e.value)
    with pytest.warns(UserWarning, match=rf"skipped 1 bad record in 1 file \({path}: 1\)"):
        got = bpe.Tokenizer.train(path, 260, progress=False, skip_bad=True)
    assert got == bpe.Tokenizer.train(["first record", "second"], 260, progress=False)
    # The CLI: one line and exit status 1, or a warning line with --skip-bad.
    cli = [sys.executable, "-m", "bpe", "info", "-t", "gpt2", str(path)]
    failed = subprocess.run(cli, capture_output=True, text=True)
    if "tiktoken" in failed.stderr:
        pytest.skip("tiktoken is not installed")
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1 and why in failed.stderr
    skipped = subprocess.run(cli + ["--skip-bad"], capture_output=True, text=True)
    assert skipped.returncode == 0 and "bad.jsonl: 2 records" in skipped.stdout
    assert skipped.stderr == f"bpe: warning: skipped 1 bad record in 1 file ({path}: 1)\n"


def test_invalid_utf8_and_truncated_streams(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"latin1.jsonl: line 2 \(byte offset 15\): not valid UTF-8"):
        bpe.Tokenizer.train(path, 260, progress=False)
    # A gzip stream cut short: an error, or with skip_bad the records before it.
    whole = gzip.compress(("".join(json.dumps({"text": f"record {k} " * 20}) + "\n" for k in range(2000))).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cannot read .*cut.jsonl.gz after line \d+ .*--skip-bad"):
        bpe.Tokenizer.train(cut, 300, progress=False)
    with pytest.warns(UserWarning, match=r"skipped 1 bad record in 1 file"):
        bpe.Tokenizer.train(cut, 300, progress=False, skip_bad=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80), min_size=1, max_size=12),
       ascii_only=st.booleans())
def test_any_text_survives_json_lines(tmp_path, texts, ascii_only):
    """Escapes, surrogate pairs, NULs, line separators inside strings: what
    json.dumps writes, the reader gives back, text for text."""
    tok = bpe.Tokenizer.train("some text to learn from " * 20, 300, progress=False)
    path = tmp_path / "h.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"a": 1, "text": t}, ensure_ascii=ascii_only) + "\n")
    out = tmp_path / "h.out"
    with open(out, "wb") as f:
        streams.encode_to_fd(tok, [str(path)], f.fileno(), "json", options=SourceOptions())
    assert [json.loads(x) for x in out.read_text().splitlines()] == [tok.encode(t, disallowed_special=()) for t in texts]


def test_directories_and_globs_expand_sorted(tmp_path):
    (tmp_path / "d" / "x").mkdir(parents=True)
    for name in ("d/b.txt", "d/a.jsonl", "d/x/c.txt", "d/.git", "e1.txt", "e2.txt"):
        (tmp_path / name).write_text("t")
    got = bpe.sources.paths.expand([tmp_path / "d", str(tmp_path / "e*.txt"), "-"])
    assert got == [str(tmp_path / p) for p in ("d/a.jsonl", "d/b.txt", "d/x/c.txt", "e1.txt", "e2.txt")] + ["-"]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        bpe.sources.paths.expand([str(tmp_path / "nothing*.txt")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no files"):
        bpe.sources.paths.expand([tmp_path / "empty"])


def test_counting_records_holds_memory_bounded(tmp_path):
    """200 MB of JSON Lines records counted (train --vocab 300) with peak
    memory that does not grow with the input: the reader's batches are
    freed as they are counted (a queue of them once grew to the input's size)."""
    record = json.dumps({"text": (CORPORA / "tinyshakespeare.txt").read_text(encoding="utf-8")[:8000]}) + "\n"
    big = tmp_path / "big.jsonl"
    with open(big, "w", encoding="utf-8") as f:
        for _ in range(200_000_000 // len(record) + 1):
            f.write(record)
    probe = (
        "import resource, subprocess, sys\n"
        "rc = subprocess.run(sys.argv[1:]).returncode\n"
        "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "bpe", "count", str(big), "-o",
                          str(tmp_path / "c.bpec"), "-q"], capture_output=True, text=True, timeout=600)
    rc, kib = out.stdout.split()
    assert rc == "0", out.stderr
    # Python, the counts of a few thousand distinct chunks, a few 8 MB batches in flight.
    assert int(kib) / 1024 < 200, f"peak {int(kib) / 1024:.0f} MB for 200 MB of records"
