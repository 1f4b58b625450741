"""Counting, training and encoding in shards (bpe/distributed/plan.py, work.py,
local.py) and on Ray (bpe/distributed/ray.py, `--engine ray`).

The claim: results are byte-identical to the single process (the .bpec
table, the .bpe file, the token stream), for any number of workers, any
shard size and any order the shards are run in; a worker killed mid-task is
retried and changes nothing; `--resume` keeps intact shards; a bad input
fails with one line naming the file and leaves nothing behind.

The cutting and the shard work are tested without Ray (property tests on
arbitrary Unicode: the same functions run inside the Ray tasks); the Ray
tests share one local Ray with 2 CPUs for the module, and are skipped only
where ray is not installed.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

np = pytest.importorskip("numpy", reason="sharded token files are read with numpy (the model extra)")

import bpe  # noqa: E402
from bpe import Tokenizer  # noqa: E402
from bpe.data import DatasetError, ShardedTokens, streams  # noqa: E402
from bpe.distributed.local import encode_local  # noqa: E402
from bpe.distributed.plan import plan, safe_cuts  # noqa: E402
from bpe.distributed.work import count_shard, merge_tables  # noqa: E402
from bpe.sources.paths import SourceOptions  # noqa: E402
from conftest import CORPORA  # noqa: E402

FILES = [str(CORPORA / "tinyshakespeare.txt"), str(CORPORA / "multilingual_udhr.txt"), str(CORPORA / "emoji-test.txt")]
SMALL = 150_000  # shard size: tinyshakespeare (1.1 MB) is cut into ~8 pieces


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train([Path(FILES[0])], 400, progress=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The shipped texts, plus JSON Lines (one record empty, one gzipped
    file) and an empty text file: every kind of shard."""
    d = tmp_path_factory.mktemp("corpus")
    records = [{"text": "First record.\nWith two lines"}, {"text": ""}, {"text": "Ünïcode ✓ 中文 record"}]
    (d / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with gzip.open(d / "b.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": "gzipped record"}) + "\n")
    (d / "empty.txt").write_text("")
    return FILES + [str(d / "a.jsonl"), str(d / "empty.txt"), str(d / "b.jsonl.gz")]


def reference_ids(tok, paths, tmp_path) -> np.ndarray:
    """The single-process encoding: `bpe encode --format numpy`."""
    out = tmp_path / "ref.npy"
    with open(out, "wb") as f:
        streams.encode_to_fd(tok, paths, f.fileno(), "numpy", disallowed_special=[])
    return np.load(out)


def table(counts) -> bytes:
    from bpe.distributed.work import table_bytes

    return table_bytes(counts)


# -- cutting and shard work, without Ray ------------------------------------------

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300)  # NUL: a binary file
lines = st.lists(st.one_of(texts, st.sampled_from(["a", "Word.", "x1", " y", "中文", "é", "\r", "  "])), max_size=40)


@settings(max_examples=40)
@given(lines, st.integers(1, 64), st.sampled_from(["gpt2", "gpt4", "gpt4o"]))
def test_pieces_count_as_the_whole_file(tmp_path_factory, parts, shard_size, pattern):
    """Any text, cut into pieces of any size: the pieces' counts sum to the
    whole file's, byte for byte; every cut is one the core calls safe."""
    path = tmp_path_factory.mktemp("p") / "t.txt"
    path.write_bytes("\n".join(parts).encode("utf-8"))
    options, regex = SourceOptions(), bpe._util.patterns.resolve_pattern(pattern)
    shards = plan([str(path)], options, regex, shard_size)
    assert b"".join(path.read_bytes()[s.start:s.end] for s in shards) == path.read_bytes()
    data = path.read_bytes()
    for s in shards[1:]:
        assert data[s.start - 1:s.start] == b"\n" and data[s.start - 2:s.start - 1].isascii()
        assert data[s.start:s.start + 1].isalnum()
    merged = merge_tables(*(count_shard(s, regex, options)[0] for s in shards))
    if data:
        whole = bpe.count(path, pattern=pattern, progress=False)
        assert merged == table(whole)


@settings(max_examples=25)
@given(st.lists(lines, min_size=1, max_size=4), st.integers(1, 80))
def test_sharded_encoding_is_the_single_process_stream(tmp_path_factory, docs, shard_size):
    """Files of any text, in shards of any size: the shards concatenated are
    the ids `bpe encode --format numpy` writes, separators included."""
    tok = Tokenizer.train(["some text to learn a few merges from\nsecond line 123"], 300, progress=False)
    d = tmp_path_factory.mktemp("e")
    paths = []
    for i, parts in enumerate(docs):
        paths.append(d / f"{i}.txt")
        paths[-1].write_bytes("\n".join(parts).encode("utf-8"))
    manifest = encode_local(tok, [str(p) for p in paths], d / "out", shard_size=shard_size, disallowed_special=())
    ids = np.asarray(ShardedTokens(d / "out", verify=True))
    assert np.array_equal(ids, reference_ids(tok, [str(p) for p in paths], d))
    assert manifest["tokens"] == len(ids) and manifest["documents"] == len(paths)


def test_safe_cuts_grow_past_text_without_any():
    """A file with no cut point near a target is cut less often, not wrongly."""
    import tempfile

    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(b" \n" * 5000 + b"a\nb" + b" " * 100)
    try:
        assert safe_cuts(f.name, os.path.getsize(f.name), 100) == [10002]  # just after "a\n"
    finally:
        os.unlink(f.name)


def test_bad_arguments_are_one_clear_error(tok, tmp_path):
    with pytest.raises(TypeError, match="bpe.Tokenizer"):
        encode_local("gpt2", FILES, tmp_path / "o")
    with pytest.raises(ValueError, match="separator"):
        encode_local(tok, FILES, tmp_path / "o", separator=10**6)
    with pytest.raises(ValueError, match="shard_size"):
        encode_local(tok, FILES, tmp_path / "o", shard_size=0)
    with pytest.raises(TypeError, match="shard_size"):
        encode_local(tok, FILES, tmp_path / "o", shard_size="64M")
    with pytest.raises(ValueError, match="standard input"):
        encode_local(tok, ["-"], tmp_path / "o")
    with pytest.raises(TypeError, match="a path"):
        encode_local(tok, 3, tmp_path / "o")
    with pytest.raises(FileNotFoundError, match="nope"):
        encode_local(tok, [str(tmp_path / "nope*.txt")], tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_record_file_without_records_puts_no_separator(tok, tmp_path):
    """Predicted to hold documents (it has bytes), it holds none: the shard
    after it, encoded with a leading separator, is encoded again without."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"other": 1}\n')
    paths = [str(bad), FILES[2]]
    manifest = encode_local(tok, paths, tmp_path / "o", skip_bad=True, disallowed_special=())
    assert [s["lead_separator"] for s in manifest["shards"]] == [False, False]
    assert manifest["skipped_records"] and "bad.jsonl" in manifest["skipped_records"]
    ref = tmp_path / "ref.npy"
    with open(ref, "wb") as f:
        streams.encode_to_fd(tok, paths, f.fileno(), "numpy", options=SourceOptions(skip_bad=True),
                             disallowed_special=[])
    assert np.array_equal(np.asarray(ShardedTokens(tmp_path / "o", verify=True)), np.load(ref))


def test_custom_patterns_never_cut(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a\nb\n" * 1000)
    assert len(plan([str(p)], SourceOptions(), r"\s+|\w+|[^\s\w]+", 10)) == 1
    assert len(plan([str(p)], SourceOptions(), bpe._util.patterns.resolve_pattern("gpt4"), 10)) > 100


# -- ShardedTokens ------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tok, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("sharded") / "out"
    encode_local(tok, corpus, out, shard_size=SMALL, disallowed_special=())
    return out


@settings(max_examples=60)
@given(st.integers(-3_000_000, 3_000_000), st.integers(-3_000_000, 3_000_000))
def test_sharded_tokens_slice_as_the_concatenation(sharded, a, b):
    x = ShardedTokens(sharded)
    whole = np.asarray(x)
    assert np.array_equal(x[a:b], whole[a:b])
    assert np.array_equal(x.view(a, b)[0:], whole[a:b])
    if len(whole):
        i = a % len(whole)
        assert x[i] == whole[i] and x[-1] == whole[-1]


def test_sharded_tokens_split_verify_and_errors(sharded, tmp_path):
    x = ShardedTokens(sharded, verify=True)
    train, val = x.split()
    assert len(val) == -(-len(x) // 10) and len(train) + len(val) == len(x)
    assert np.array_equal(np.concatenate([np.asarray(train), np.asarray(val)]), np.asarray(x))
    xs, ys = x.sample(4, 16)
    assert xs.shape == (4, 16) and (xs[:, 1:] == ys[:, :-1]).all()
    with pytest.raises(TypeError, match="ints or slices"):
        x["a"]
    with pytest.raises(ValueError, match="no step"):
        x[::2]
    with pytest.raises(ValueError, match="below 1"):
        x.split(1.5)
    # A damaged shard: the size check, or the checksum on request.
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(sharded, copy)
    first = copy / "shard-00000.bin"
    data = bytearray(first.read_bytes())
    data[0] ^= 1
    first.write_bytes(bytes(data))
    ShardedTokens(copy)
    with pytest.raises(DatasetError, match="shard-00000.bin: its sha256"):
        ShardedTokens(copy, verify=True)
    first.write_bytes(bytes(data[:-2]))
    with pytest.raises(DatasetError, match="shard-00000.bin has"):
        ShardedTokens(copy)
    with pytest.raises(DatasetError, match="no manifest.json"):
        ShardedTokens(tmp_path)


def test_gpt_trains_from_a_sharded_directory(tok, sharded, tmp_path):
    pytest.importorskip("torch")
    from bpe import data as bdata
    from bpe.cli import build_parser
    from bpe.cli import gpt as gpt_cli

    tok_path = tmp_path / "tok.bpe"
    tok.save(tok_path)
    meta = bdata.load_meta(sharded)
    assert meta["splits"]["val"]["tokens"] == len(bdata.load_split(sharded, "val"))
    args = build_parser().parse_args([
        "gpt", "train", "--data", str(sharded), "-t", str(tok_path), "--out", str(tmp_path / "gpt.pt"),
        "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "2",
        "--steps", "2", "--warmup", "1", "--eval-interval", "2", "--eval-iters", "1", "--device", "cpu",
    ])
    logs = []
    gpt_cli.cmd_train(args, log=logs.append)
    assert (tmp_path / "gpt.pt").exists() and any("train" in line and "val" in line for line in logs)


# -- on Ray -----------------------------------------------------------------------------


def test_progress_line_counts_shards_and_bytes(capsys):
    from bpe.progress import ClusterProgress

    bar = ClusterProgress("counting on Ray", 3, 3_000_000, True)
    bar.update(1, 1_000_000)
    bar.update(3, 3_000_000)
    bar.finish()
    err = capsys.readouterr().err
    assert "counting on Ray: 3/3 shards, 3.0 MB/3.0 MB, " in err and err.endswith("\n")
    quiet = ClusterProgress("x", 1, 1, False)
    quiet.update(1, 1)
    quiet.finish()
    assert capsys.readouterr().err == ""


def test_cli_starts_and_stops_its_own_ray(tmp_path):
    """No --address: the command starts a local Ray (--workers CPUs), under
    nohup's conditions, and shuts it down; the table is the local one."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'bpe[ray]')")
    r = cli("count", FILES[1], "-o", tmp_path / "r.bpec", "--engine", "ray", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 0 and "wrote" in r.stderr, r.stderr
    assert (tmp_path / "r.bpec").read_bytes() == table(bpe.count(Path(FILES[1]), progress=False))



@pytest.fixture(scope="module")
def cluster():
    """One local Ray with 2 CPUs for the module (starting one takes seconds)."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'bpe[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 << 20, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("workers,shard_size,shuffle", [(1, SMALL, None), (2, SMALL, 1), (2, 1 << 30, 2)])
def test_ray_count_and_train_are_the_single_process_ones(cluster, corpus, workers, shard_size, shuffle):
    from bpe import distributed

    counts = distributed.count(corpus, num_workers=workers, shard_size=shard_size, _shuffle=shuffle)
    whole = bpe.count([Path(p) for p in corpus], progress=False)
    assert table(counts) == table(whole)
    assert cluster.is_initialized()  # the caller's Ray is left running
    if shuffle == 1:
        tok = distributed.train(corpus, 600, num_workers=workers, shard_size=shard_size)
        assert tok._dumps() == Tokenizer.train([Path(p) for p in corpus], 600, progress=False)._dumps()


@pytest.mark.parametrize("workers,shuffle", [(1, None), (2, 3)])
def test_ray_encode_is_the_single_process_stream(cluster, tok, corpus, tmp_path, workers, shuffle):
    from bpe import distributed

    manifest = distributed.encode(tok, corpus, tmp_path / "ray", shard_size=SMALL, disallowed_special=(),
                                  num_workers=workers, _shuffle=shuffle)
    assert np.array_equal(np.asarray(ShardedTokens(tmp_path / "ray", verify=True)),
                          reference_ids(tok, corpus, tmp_path))
    local = encode_local(tok, corpus, tmp_path / "local", shard_size=SMALL, disallowed_special=())
    assert manifest == local
    for s in manifest["shards"]:
        assert (tmp_path / "ray" / s["file"]).read_bytes() == (tmp_path / "local" / s["file"]).read_bytes()
    assert manifest["dtype"] == "uint16" and manifest["tokenizer"]["sha256"] == bpe.data.tokenizer_sha256(tok)
    assert len(manifest["shards"]) > len(corpus)  # tinyshakespeare was cut


def test_a_killed_worker_is_retried_and_changes_nothing(cluster, tok, corpus, tmp_path):
    """Each shard's first attempt SIGKILLs its own worker process."""
    from bpe import distributed

    marks = tmp_path / "marks"
    marks.mkdir()
    counts = distributed.count(FILES, shard_size=400_000, _kill_once=str(marks))
    assert table(counts) == table(bpe.count([Path(p) for p in FILES], progress=False))
    assert len(os.listdir(marks)) >= 3  # workers really died
    (marks / "e").mkdir()
    distributed.encode(tok, FILES, tmp_path / "out", shard_size=400_000, disallowed_special=(),
                       _kill_once=str(marks / "e"))
    assert len(os.listdir(marks / "e")) >= 3
    assert np.array_equal(np.asarray(ShardedTokens(tmp_path / "out", verify=True)), reference_ids(tok, FILES, tmp_path))


def test_resume_keeps_intact_shards_and_redoes_the_rest(cluster, tok, corpus, tmp_path):
    from bpe import distributed

    out = tmp_path / "out"
    first = distributed.encode(tok, corpus, out, shard_size=SMALL, disallowed_special=())
    names = [s["file"] for s in first["shards"]]
    before = {n: (out / n).stat().st_mtime_ns for n in names}
    (out / names[1]).unlink()  # lost
    (out / names[2]).write_bytes(b"\0\0" + (out / names[2]).read_bytes()[2:])  # damaged
    os.unlink(out / "manifest.json")  # the run did not finish
    again = distributed.encode(tok, corpus, out, shard_size=SMALL, disallowed_special=(), resume=True)
    assert again == first
    after = {n: (out / n).stat().st_mtime_ns for n in names}
    assert [n for n in names if after[n] != before[n]] == names[1:3]
    ShardedTokens(out, verify=True)


def test_a_bad_shard_fails_naming_its_file_and_writes_nothing(cluster, tok, tmp_path):
    from bpe import distributed

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": 3}\n')
    with pytest.raises(ValueError, match="bad.jsonl"):
        distributed.encode(tok, [FILES[0], str(bad)], tmp_path / "out", shard_size=SMALL)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="bad.jsonl"):
        distributed.count([FILES[0], str(bad)])
    with pytest.raises((ValueError, OSError), match="missing.txt"):
        distributed.count([FILES[0], str(tmp_path / "missing.txt")])
    with pytest.raises(TypeError, match="num_workers"):
        distributed.count(FILES, num_workers="2")
    with pytest.raises(ValueError, match="at least 1"):
        distributed.count(FILES, num_workers=0)
    with pytest.raises(TypeError, match="path"):
        distributed.count(["text", 3])
    with pytest.raises(ValueError, match="vocab_size|at least"):
        distributed.train(FILES, 10)


def cli(*args, cwd):
    """The CLI as CI runs it: SIGINT ignored (nohup), stdin from /dev/null."""
    r = subprocess.run([sys.executable, "-m", "bpe", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_cli_engine_ray_matches_engine_local(cluster, tmp_path):
    address = cluster.get_runtime_context().gcs_address  # the module's Ray: no new one started
    ray_args = ["--engine", "ray", "--address", address, "--shard-size", "200K", "-q"]
    for engine in (ray_args, ["-q"]):
        tag = "ray" if engine is ray_args else "local"
        assert cli("count", *FILES, "-o", tmp_path / f"{tag}.bpec", *engine, cwd=tmp_path).returncode == 0
        assert cli("train", *FILES, "--vocab", "300", "-o", tmp_path / f"{tag}.bpe", *engine,
                   cwd=tmp_path).returncode == 0
    assert (tmp_path / "ray.bpec").read_bytes() == (tmp_path / "local.bpec").read_bytes()
    assert (tmp_path / "ray.bpe").read_bytes() == (tmp_path / "local.bpe").read_bytes()
    tok = tmp_path / "local.bpe"
    r = cli("encode", "-t", tok, *FILES, "--out", tmp_path / "r", "--special-as-text", *ray_args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("encode", "-t", tok, *FILES, "--out", tmp_path / "l", "--format", "shards", "--special-as-text",
            "--shard-size", "200K", cwd=tmp_path)
    assert r.returncode == 0 and "shards" in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path / "r")) == sorted(os.listdir(tmp_path / "l"))
    for name in os.listdir(tmp_path / "r"):
        assert (tmp_path / "r" / name).read_bytes() == (tmp_path / "l" / name).read_bytes(), name
    # Errors: one line, exit 1 (a bad input) or 2 (a bad command line).
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    r = cli("encode", "-t", tok, FILES[0], bad, "--out", tmp_path / "x", *ray_args, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "bad.jsonl" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()
    r = cli("count", *FILES, "-o", tmp_path / "y.bpec", "--address", "auto", cwd=tmp_path)
    assert r.returncode == 2 and "--engine ray" in r.stderr
    r = cli("encode", "-t", tok, *FILES, "--out", tmp_path / "z", "--resume", cwd=tmp_path)
    assert r.returncode == 1 and "--resume" in r.stderr


def test_missing_ray_is_one_line_naming_the_extra(tmp_path):
    code = ("import sys; sys.modules['ray'] = None\n"
            "from bpe.cli import main\n"
            f"sys.exit(main(['count', {FILES[0]!r}, '-o', 'c.bpec', '--engine', 'ray']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 1 and r.stderr == "bpe: error: the Ray engine needs ray: pip install 'bpe[ray]'\n"
