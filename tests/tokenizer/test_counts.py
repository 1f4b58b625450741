"""Count tables (.bpec) and counting in bounded memory.

The claims: training from the merged counts of shards gives the tokenizer
training on all shards at once gives, byte for byte; tables round-trip,
merge in any order to the same bytes, and are refused (naming the file and
byte offset) when cut short, corrupted or of another version; counting under
any ``max_memory`` cap gives exactly the uncapped counts, leaves no spill
files behind, and stays within the cap plus a constant; ``min_frequency``
drops exactly the chunks seen fewer times.

The format is checked against a reader and writer written here in Python
from the documentation in ``rust/train/table.rs`` alone.
"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

import bpe
from bpe import Counts, Tokenizer
from bpe.counts import parse_memory
from conftest import CORPUS_FILES
from helpers import assert_clean_failure, ok, peak_rss_mb, run

# -- the format, from its documentation ------------------------------------------


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_bpec(pattern: str, counts: dict[bytes, int]) -> bytes:
    p = pattern.encode()
    out = bytearray(b"bpe-counts v1\npattern %d " % len(p) + p + b"\n")
    previous = b""
    for chunk in sorted(counts):
        shared = len(os.path.commonprefix([chunk, previous]))
        out += varint(counts[chunk]) + varint(shared) + varint(len(chunk) - shared) + chunk[shared:]
        previous = chunk
    out += b"\0" + varint(len(counts)) + varint(sum(counts.values()))
    return bytes(out) + fnv1a(out).to_bytes(8, "little")


def read_bpec(data: bytes) -> tuple[str, dict[bytes, int]]:
    pos = 0

    def number() -> int:
        nonlocal pos
        v = shift = 0
        while True:
            b = data[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    first, rest = data.split(b"\n", 1)
    assert first == b"bpe-counts v1"
    word, n, rest = rest.split(b" ", 2)
    assert word == b"pattern"
    pattern = rest[: int(n)].decode()
    pos = len(data) - len(rest) + int(n) + 1
    counts, chunk = {}, b""
    while (count := number()) != 0:
        shared, length = number(), number()
        chunk = chunk[:shared] + data[pos : pos + length]
        pos += length
        counts[chunk] = count
    assert (number(), number()) == (len(counts), sum(counts.values()))
    assert int.from_bytes(data[pos:], "little") == fnv1a(data[:pos]) and len(data) == pos + 8
    return pattern, counts


def chunk_counts(texts: list[str], pattern: str = "gpt4") -> Counter:
    counts = Counter()
    for t in texts:
        counts.update(c.encode() for c in bpe.pretokenize(t, pattern))
    return counts


# -- helpers ----------------------------------------------------------------------


def saved(tok: Tokenizer, path: Path) -> bytes:
    tok.save(path)
    return path.read_bytes()


def shards(tmp_path: Path, n: int, seed: int) -> list[Path]:
    """The corpora's text cut at random points into ``n`` files."""
    text = "".join(p.read_text(encoding="utf-8") for p in CORPUS_FILES)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), n - 1))
    paths = []
    for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(text)])):
        paths.append(tmp_path / f"shard{seed}-{i}.txt")
        paths[-1].write_text(text[a:b], encoding="utf-8")
    return paths


@pytest.fixture
def spill_dir(tmp_path, monkeypatch) -> Path:
    """The temporary directory spills go to, for this test only."""
    d = tmp_path / "spill"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


# -- merged shards train as the whole ---------------------------------------------


@pytest.mark.parametrize("split", ["files", "random3", "random7"])
def test_training_on_merged_shard_counts_is_byte_identical(tmp_path, split):
    if split == "files":
        parts = list(CORPUS_FILES)
    else:
        parts = shards(tmp_path, int(split[-1]), seed=len(split) + int(split[-1]))
    whole = saved(Tokenizer.train(parts, 2000), tmp_path / "whole.bpe")
    tables = []
    for i, part in enumerate(parts):
        tables.append(tmp_path / f"{i}.bpec")
        bpe.count([part]).save(tables[-1])
    random.Random(3).shuffle(tables)
    Counts.merge_files(tables, tmp_path / "all.bpec")
    assert saved(Tokenizer.train_from_counts(tmp_path / "all.bpec", 2000), tmp_path / "a.bpe") == whole
    # In memory too: Counts merged, then trained from (and left as they were).
    merged = Counts.merge(*[Counts.load(t) for t in tables])
    assert saved(Tokenizer.train_from_counts(merged, 2000), tmp_path / "b.bpe") == whole
    assert saved(Tokenizer.train_from_counts(merged, 2000), tmp_path / "c.bpe") == whole
    merged.save(tmp_path / "again.bpec")
    assert (tmp_path / "again.bpec").read_bytes() == (tmp_path / "all.bpec").read_bytes()


def test_tables_hold_exactly_the_chunk_counts(tmp_path):
    texts = [p.read_text(encoding="utf-8") for p in CORPUS_FILES]
    for pattern in ("gpt4", "gpt2", r"\s+|\w+|[^\s\w]+"):
        counts = bpe.count(texts, pattern=pattern)
        entries, total = counts.save(tmp_path / "t.bpec")
        data = (tmp_path / "t.bpec").read_bytes()
        got_pattern, got = read_bpec(data)
        expected = chunk_counts(texts, pattern)
        assert got_pattern == bpe.resolve_pattern(pattern)
        assert got == dict(expected)
        assert (entries, total) == (len(counts), counts.total()) == (len(expected), sum(expected.values()))
        # The bytes are the documented format's, to the last one.
        assert data == write_bpec(got_pattern, dict(expected))
        assert len(data) < sum(map(len, expected)), "shared prefixes make the table smaller than its chunks"


def test_tables_round_trip(tmp_path):
    counts = bpe.count(list(CORPUS_FILES))
    counts.save(tmp_path / "a.bpec")
    loaded = Counts.load(tmp_path / "a.bpec")
    assert (len(loaded), loaded.total(), loaded.pattern) == (len(counts), counts.total(), counts.pattern)
    loaded.save(tmp_path / "b.bpec")
    assert (tmp_path / "a.bpec").read_bytes() == (tmp_path / "b.bpec").read_bytes()
    assert repr(loaded).startswith(f"<Counts {len(counts):,} chunks pattern=gpt4")


def test_merging_is_associative_and_commutative(tmp_path):
    a, b, c = (tmp_path / f"{n}.bpec" for n in "abc")
    for path, texts in ((a, ["the cat sat", "on the mat"]), (b, ["the dog", "sat 123"]), (c, ["日本語 the", "!!"])):
        bpe.count(texts).save(path)

    def merged(name, *paths):
        Counts.merge_files(paths, tmp_path / name)
        return tmp_path / name

    abc = merged("abc", a, b, c).read_bytes()
    assert merged("cba", c, b, a).read_bytes() == abc
    assert merged("ab_c", merged("ab", a, b), c).read_bytes() == abc
    assert merged("a_bc", a, merged("bc", b, c)).read_bytes() == abc
    Counts.merge(Counts.load(c), Counts.load(a), Counts.load(b)).save(tmp_path / "mem.bpec")
    assert (tmp_path / "mem.bpec").read_bytes() == abc
    _, got = read_bpec(abc)
    assert got == dict(chunk_counts(["the cat sat", "on the mat", "the dog", "sat 123", "日本語 the", "!!"]))


def test_tables_of_different_patterns_are_not_merged(tmp_path):
    bpe.count("some text").save(tmp_path / "gpt4.bpec")
    bpe.count("some text", pattern="gpt2").save(tmp_path / "gpt2.bpec")
    with pytest.raises(ValueError, match=r"cannot merge .*gpt4\.bpec and .*gpt2\.bpec: they were counted with "
                                         r"different split patterns \(gpt4 and gpt2\)"):
        Counts.merge_files([tmp_path / "gpt4.bpec", tmp_path / "gpt2.bpec"], tmp_path / "out.bpec")
    assert not (tmp_path / "out.bpec").exists()
    with pytest.raises(ValueError, match=r"different split patterns \(gpt4 and gpt2\)"):
        Counts.merge(Counts.load(tmp_path / "gpt4.bpec"), Counts.load(tmp_path / "gpt2.bpec"))


def test_bad_tables_are_refused_naming_file_and_offset(tmp_path):
    bpe.count(["the cat sat on the mat", "again"]).save(tmp_path / "good.bpec")
    good = (tmp_path / "good.bpec").read_bytes()
    bad = tmp_path / "bad.bpec"
    header = len(b"bpe-counts v1\n")
    cases = {
        "truncated": (good[:-3], rf"bad\.bpec is truncated: it ends at byte offset {len(good) - 3} inside the table"),
        "corrupted": (good[:-20] + bytes([good[-20] ^ 1]) + good[-19:], r"bad\.bpec is corrupted at byte offset \d+"),
        "version": (good.replace(b"v1", b"v9", 1), r"bad\.bpec is a bpe count table of version v9 \(byte offset 12\)"),
        "not a table": (b"bpe-tokenizer v1\n", r"bad\.bpec is not a bpe count table \(byte offset 0"),
        "checksum": (good[:-1] + bytes([good[-1] ^ 0x40]), rf"corrupted at byte offset {len(good) - 8}: the checksum"),
        "after": (good + b"x", rf"corrupted at byte offset {len(good)}: there are bytes after the checksum"),
    }
    assert good[header:].startswith(b"pattern ")
    for name, (data, message) in cases.items():
        bad.write_bytes(data)
        for load in (Counts.load, lambda p: Tokenizer.train_from_counts(p, 300),
                     lambda p: Counts.merge_files([tmp_path / "good.bpec", p], tmp_path / "out.bpec")):
            with pytest.raises(ValueError, match=message):
                load(bad)
        assert not (tmp_path / "out.bpec").exists(), name


# -- bounded memory ---------------------------------------------------------------


def test_a_tiny_max_memory_counts_and_trains_exactly(tmp_path, spill_dir, monkeypatch):
    files = list(CORPUS_FILES)
    texts = [p.read_text(encoding="utf-8") for p in files]
    whole = bpe.count(files)
    whole.save(tmp_path / "whole.bpec")
    monkeypatch.setattr(bpe.sources.corpus, "_BATCH_CHARS", 5000)  # texts in small batches: spills between them
    for source in (files, texts):
        for cap in (1, 20_000, "200K"):
            capped = bpe.count(source, max_memory=cap)
            assert list(spill_dir.iterdir()), "something was spilled"
            capped.save(tmp_path / "capped.bpec")
            assert (tmp_path / "capped.bpec").read_bytes() == (tmp_path / "whole.bpec").read_bytes(), cap
            assert (len(capped), capped.total()) == (len(whole), whole.total())
            del capped
            gc.collect()
            assert not list(spill_dir.iterdir()), "the spill files go with the counts"
    unbounded = saved(Tokenizer.train(files, 1500), tmp_path / "a.bpe")
    assert saved(Tokenizer.train(files, 1500, max_memory=10_000), tmp_path / "b.bpe") == unbounded
    assert saved(Tokenizer.train(texts, 1500, max_memory="16K"), tmp_path / "c.bpe") == unbounded
    # Picky training reads the spilled runs as they merge, as ordinary training does.
    picky = saved(Tokenizer.train(files, 1500, prune=0.9), tmp_path / "p.bpe")
    assert saved(Tokenizer.train(files, 1500, prune=0.9, max_memory=10_000), tmp_path / "q.bpe") == picky
    assert not list(spill_dir.iterdir())


def test_parquet_under_a_tiny_max_memory_counts_exactly(tmp_path, spill_dir):
    """Arrow batches are counted by threads that hand their maps to the
    total as they go (`count_documents_into`): under a cap they spill, and
    the counts are those of the same records as texts, uncapped."""
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'bpe[data]')")
    pq = pytest.importorskip("pyarrow.parquet")
    records = [p.read_text(encoding="utf-8") for p in CORPUS_FILES]
    records = [r[i:i + 7000] for r in records for i in range(0, len(r), 7000)]
    path = tmp_path / "records.parquet"
    pq.write_table(pa.table({"text": records}), path, row_group_size=50)
    bpe.count(records).save(tmp_path / "texts.bpec")
    for cap in (None, 1, "200K"):
        counts = bpe.count([path], max_memory=cap)
        if cap is not None:
            assert list(spill_dir.iterdir()), "something was spilled"
        counts.save(tmp_path / "parquet.bpec")
        assert (tmp_path / "parquet.bpec").read_bytes() == (tmp_path / "texts.bpec").read_bytes(), cap
        del counts
        gc.collect()
    assert not list(spill_dir.iterdir())


def test_spill_files_are_removed_after_an_error_or_ctrl_c(tmp_path, spill_dir, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(CORPUS_FILES[0].read_bytes() + b"\xff")
    with pytest.raises(ValueError, match="is not valid UTF-8") as caught:
        bpe.count([*CORPUS_FILES, bad], max_memory=1)
    assert caught.value is not None  # the traceback (and with it the trainer) is still alive
    assert not list(spill_dir.iterdir())
    with pytest.raises(ValueError, match="is not valid UTF-8"):
        Tokenizer.train([*CORPUS_FILES, bad], 300, max_memory=1)
    assert not list(spill_dir.iterdir())
    monkeypatch.setattr(bpe.sources.corpus, "_BATCH_CHARS", 1000)

    def interrupted():
        for p in CORPUS_FILES:
            yield p.read_text(encoding="utf-8")
        assert list(spill_dir.iterdir()), "spilled before the interrupt"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bpe.count(interrupted(), max_memory=1)
    assert not list(spill_dir.iterdir())


def test_min_frequency_drops_exactly_the_rare_chunks(tmp_path):
    texts = [p.read_text(encoding="utf-8") for p in CORPUS_FILES]
    counts = chunk_counts(texts)
    bpe.count(texts).save(tmp_path / "all.bpec")
    for n in (2, 5):
        kept = {c: k for c, k in counts.items() if k >= n}
        assert 0 < len(kept) < len(counts)
        (tmp_path / "kept.bpec").write_bytes(write_bpec(bpe.GPT4_PATTERN, kept))
        expected = saved(Tokenizer.train_from_counts(tmp_path / "kept.bpec", 1200), tmp_path / "e.bpe")
        assert saved(Tokenizer.train_from_counts(tmp_path / "all.bpec", 1200, min_frequency=n), tmp_path / "f.bpe") == expected
        assert saved(Tokenizer.train(texts, 1200, min_frequency=n), tmp_path / "g.bpe") == expected
        assert saved(Tokenizer.train(texts, 1200, min_frequency=n, max_memory=1), tmp_path / "h.bpe") == expected


#: What a capped `bpe count` may use beyond --max-memory: Python with bpe
#: imported (20 MB), the segments in flight and the counting threads' own
#: maps. Measured on 2 cores: cap + 34 MB at 64M, cap + 38 MB at 16M (docs/errors.md,
#: "Limits").
CAP_SLACK_MB = 50


def random_words(path: Path, size: int) -> None:
    """Random lowercase words of about 7 letters: nearly every one a new chunk."""
    letters = b"abcdefghijklmnopqrstuvwxyz"
    table = bytes(letters[b % 26] if b < 224 else ord(" ") for b in range(256))
    data = bytearray(random.Random(7).randbytes(size).translate(table))
    data[99::100] = b"\n" * len(data[99::100])
    path.write_bytes(data)


def test_peak_memory_stays_under_the_cap(tmp_path):
    corpus = tmp_path / "words.txt"
    random_words(corpus, 30_000_000)
    rc, unbounded = peak_rss_mb(["count", corpus, "-o", tmp_path / "a.bpec", "-q"])
    assert rc == 0
    cap = 16
    rc, capped = peak_rss_mb(["count", corpus, "-o", tmp_path / "b.bpec", "-q", "--max-memory", f"{cap}M"])
    assert rc == 0
    assert (tmp_path / "a.bpec").read_bytes() == (tmp_path / "b.bpec").read_bytes()
    assert capped < cap + CAP_SLACK_MB, f"peak {capped:.0f} MB under --max-memory {cap}M"
    assert unbounded > 2 * capped, f"the corpus must need the cap to show it: {unbounded:.0f} MB unbounded"


# -- arguments --------------------------------------------------------------------


def test_max_memory_and_min_frequency_arguments():
    assert parse_memory(None) is None
    assert parse_memory(1000) == 1000
    assert parse_memory("2G") == 2 << 30
    assert parse_memory("512M") == parse_memory("512MiB") == parse_memory("512mi") == 512 << 20
    # KB, MB, GB: powers of 1000 (bpe/_util/sizes.py), as GNU coreutils read them.
    assert parse_memory("512mb") == parse_memory("512MB") == 512 * 10**6
    assert parse_memory("64KB") == 64_000 and parse_memory("64K") == parse_memory("64KiB") == 65_536
    assert parse_memory("1.5K") == 1536
    for bad, error in ((True, TypeError), (1.5, TypeError), ("2Q", ValueError), (0, ValueError), ("-1G", ValueError)):
        with pytest.raises(error, match="max_memory"):
            bpe.count("text", max_memory=bad)
    for bad, error in ((0, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="min_frequency"):
            Tokenizer.train("text", 300, min_frequency=bad)
    with pytest.raises(TypeError, match="counts must be a bpe.Counts or the path of a .bpec file"):
        Tokenizer.train_from_counts(42, 300)
    with pytest.raises(ValueError, match="there is nothing to count"):
        bpe.count([])


# -- the command line -------------------------------------------------------------


def test_cli_count_merge_and_train_from_counts(tmp_path):
    parts = list(CORPUS_FILES)
    ok(run("train", *parts, "--vocab", "1500", "-o", "whole.bpe", "-q", cwd=tmp_path))
    for i, part in enumerate(parts):
        out = ok(run("count", part, "-o", f"{i}.bpec", *(["--max-memory", "64K"] if i % 2 else []), cwd=tmp_path))
        assert out.stderr.startswith(f"wrote {i}.bpec: ") and "distinct chunks" in out.stderr
    ok(run("count", "--merge", *[f"{i}.bpec" for i in range(len(parts))], "-o", "all.bpec", "-q", cwd=tmp_path))
    ok(run("train", "--from-counts", "all.bpec", "--vocab", "1500", "-o", "from.bpe", "-q", cwd=tmp_path))
    assert (tmp_path / "from.bpe").read_bytes() == (tmp_path / "whole.bpe").read_bytes()
    ok(run("train", *parts, "--vocab", "1500", "-o", "capped.bpe", "-q", "--max-memory", "100K", cwd=tmp_path))
    assert (tmp_path / "capped.bpe").read_bytes() == (tmp_path / "whole.bpe").read_bytes()
    ok(run("train", "--from-counts", "all.bpec", "--vocab", "1500", "-o", "m2.bpe", "-q", "--min-frequency", "2",
           cwd=tmp_path))
    ok(run("train", *parts, "--vocab", "1500", "-o", "m2b.bpe", "-q", "--min-frequency", "2", cwd=tmp_path))
    assert (tmp_path / "m2.bpe").read_bytes() == (tmp_path / "m2b.bpe").read_bytes()
    assert (tmp_path / "m2.bpe").read_bytes() != (tmp_path / "whole.bpe").read_bytes()
    # Standard input is counted like a file.
    text = parts[0].read_text(encoding="utf-8")
    ok(run("count", "-", "-o", "stdin.bpec", "-q", cwd=tmp_path, stdin=text))
    ok(run("count", parts[0], "-o", "file.bpec", "-q", cwd=tmp_path))
    assert (tmp_path / "stdin.bpec").read_bytes() == (tmp_path / "file.bpec").read_bytes()


def test_cli_count_errors(tmp_path):
    (tmp_path / "t.txt").write_text("some text\n")
    ok(run("count", "t.txt", "-o", "t.bpec", "-q", cwd=tmp_path))
    ok(run("count", "t.txt", "-o", "g2.bpec", "-q", "--pattern", "gpt2", cwd=tmp_path))
    usage = [
        ("train", "--vocab", "300"),
        ("train", "t.txt", "--from-counts", "t.bpec", "--vocab", "300"),
        ("train", "--from-counts", "t.bpec", "--pattern", "gpt2", "--vocab", "300"),
        ("train", "--from-counts", "t.bpec", "--max-memory", "1G", "--vocab", "300"),
        ("train", "t.txt", "--vocab", "300", "--max-memory", "lots"),
        ("train", "t.txt", "--vocab", "300", "--min-frequency", "0"),
        ("count", "t.txt"),
        ("count", "--merge", "t.bpec", "-o", "x.bpec", "--pattern", "gpt2"),
    ]
    for args in usage:
        assert_clean_failure(run(*args, cwd=tmp_path), usage=True)
    line = assert_clean_failure(run("count", "--merge", "t.bpec", "g2.bpec", "-o", "x.bpec", cwd=tmp_path))
    assert "different split patterns (gpt4 and gpt2)" in line
    (tmp_path / "cut.bpec").write_bytes((tmp_path / "t.bpec").read_bytes()[:-5])
    for args in (("train", "--from-counts", "cut.bpec", "--vocab", "300"), ("count", "--merge", "t.bpec", "cut.bpec", "-o", "x.bpec")):
        line = assert_clean_failure(run(*args, cwd=tmp_path))
        assert "cut.bpec is truncated: it ends at byte offset" in line, line
    assert not (tmp_path / "x.bpec").exists()
    line = assert_clean_failure(run("train", "--from-counts", "missing.bpec", "--vocab", "300", cwd=tmp_path))
    assert "missing.bpec" in line
