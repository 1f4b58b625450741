"""Bulk encoding and the chunk cache: every fast path gives the ids of the
plain one. `encode_files` (files read, cut and encoded in Rust) against
`encode` of each file's text and against tiktoken; `encode_batch_to_numpy`
against `encode_batch`; `encode(num_threads=...)` against one thread; and
the cache on, off, tiny (always full) and cleared against no cache."""

import os

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

import bpe
from bpe import Tokenizer
from conftest import CORPORA, CORPUS_FILES

SPECIALS = ("<|endoftext|>", "<|fim|>")


@pytest.fixture(scope="module")
def tok():
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:200_000]
    text += (CORPORA / "multilingual_udhr.txt").read_text()[:100_000]
    return Tokenizer.train(text, 1000, special_tokens=SPECIALS, progress=False)


def write(path, text):
    path.write_text(text, encoding="utf-8", newline="")
    return path


# -- encode_files ------------------------------------------------------------------


def test_files_give_the_ids_of_their_texts(tok, tmp_path):
    texts = [p.read_text(encoding="utf-8") for p in CORPUS_FILES] + ["", "one line, no newline"]
    paths = [write(tmp_path / f"{i}.txt", t) for i, t in enumerate(texts)]
    eot = tok.special_tokens["<|endoftext|>"]
    for threads in (1, 2, None):
        ids, offsets = tok.encode_files(paths, separator="<|endoftext|>", num_threads=threads)
        assert ids.dtype == np.uint16 and offsets.dtype == np.int64
        assert len(offsets) == len(paths) + 1 and offsets[-1] == len(ids)
        for i, text in enumerate(texts):
            own = ids[offsets[i] : offsets[i + 1]].tolist()
            want = tok.encode(text) + ([eot] if i < len(texts) - 1 else [])
            assert own == want, (threads, paths[i].name)
    ids, offsets = tok.encode_files(paths, dtype="uint32")
    assert ids.dtype == np.uint32
    assert ids.tolist() == [i for t in texts for i in tok.encode(t)]


def test_many_files_need_few_descriptors(tok, tmp_path):
    # A directory of thousands of shards: each thread holds one file open at
    # a time (rust/run/bulk/files.rs), so a process allowed 64 descriptors
    # encodes 300 files (all opened at once, they would need 300).
    import subprocess
    import sys
    import textwrap

    texts = [f"file {i}: " + "some words, and more words\n" * (i % 7) for i in range(300)]
    paths = [write(tmp_path / f"{i:03}.txt", t) for i, t in enumerate(texts)]
    tok.save(tmp_path / "t.bpe")
    child = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        import bpe
        tok = bpe.Tokenizer.load({str(tmp_path / "t.bpe")!r})
        paths = sorted(p for p in __import__("pathlib").Path({str(tmp_path)!r}).glob("*.txt"))
        ids, offsets = tok.encode_files(paths, num_threads=2)
        sys.stdout.write(" ".join(map(str, ids.tolist())))
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert list(map(int, out.stdout.split())) == [i for t in texts for i in tok.encode(t)]


def test_one_large_file_equals_tiktoken(tmp_path):
    """A file of several blocks, cut for two threads, gives tiktoken's ids."""
    text = "".join(p.read_text(encoding="utf-8") for p in CORPUS_FILES) * 3
    path = write(tmp_path / "big.txt", text)
    for name in ("cl100k_base", "o200k_base"):
        ours = Tokenizer.from_tiktoken(name)
        ids, offsets = ours.encode_files(path, num_threads=2)
        assert ids.dtype == np.uint32 and offsets.tolist() == [0, len(ids)]
        assert ids.tolist() == tiktoken.get_encoding(name).encode_ordinary(text), name


def test_special_tokens_in_files(tok, tmp_path):
    path = write(tmp_path / "s.txt", "line one\nan <|fim|> inside\n")
    with pytest.raises(ValueError, match=r"s\.txt holds the special token \"<\|fim\|>\" at byte offset 12 \(line 2\)"):
        tok.encode_files([path])
    text = path.read_text()
    assert tok.encode_files(path, disallowed_special=())[0].tolist() == tok.encode_ordinary(text)
    assert tok.encode_files(path, allowed_special="all")[0].tolist() == tok.encode(text, allowed_special="all")


def test_bad_files_are_named(tok, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good\nstill good\n\xff bad")
    with pytest.raises(ValueError, match=r"bad\.txt is not valid UTF-8 at byte offset 16 \(line 3\)"):
        tok.encode_files([bad])
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        tok.encode_files([tmp_path / "missing.txt"])
    with pytest.raises(ValueError, match="not a special token"):
        tok.encode_files([bad], separator="<|nope|>")
    with pytest.raises(ValueError, match="uint16 or uint32"):
        tok.encode_files([bad], dtype="int8")


def test_custom_pattern_files_are_encoded_whole(tmp_path):
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:50_000]
    custom = Tokenizer.train(text, 400, pattern=r"\s+|\w+|[^\s\w]+", progress=False)
    path = write(tmp_path / "c.txt", text)
    assert custom.encode_files(path)[0].tolist() == custom.encode(text)


def test_progress_is_reported(tok, tmp_path):
    path = write(tmp_path / "p.txt", "some words\n" * 1000)
    seen = []
    tok.encode_files(path, progress=seen.append)
    assert seen[-1] == os.path.getsize(path)


# -- encode_batch_to_numpy and num_threads ----------------------------------------------


def test_batch_to_numpy_equals_encode_batch(tok):
    texts = [p.read_text(encoding="utf-8")[:5000 * (i + 1)] for i, p in enumerate(CORPUS_FILES)] + ["", "x"]
    ids, offsets = tok.encode_batch_to_numpy(texts, num_threads=2)
    lists = tok.encode_batch(texts)
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == lists
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        tok.encode_batch_to_numpy(["fine", "not <|fim|> fine"])
    assert tok.encode_batch_to_numpy(["\ud800"])[0].tolist() == tok.encode("\ud800")


def test_num_threads_on_one_text(tok):
    text = "".join(p.read_text(encoding="utf-8") for p in CORPUS_FILES) + " <|fim|> end"
    one = tok.encode(text, allowed_special="all")
    assert tok.encode(text, allowed_special="all", num_threads=2) == one
    assert tok.encode(text, allowed_special="all", num_threads=None) == one
    assert tok.encode_to_numpy(text, allowed_special="all", num_threads=2).tolist() == one
    with pytest.raises(ValueError, match="<\\|fim\\|>"):
        tok.encode(text, num_threads=2)
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode(text, num_threads=0)


# -- the chunk cache ------------------------------------------------------------------


def test_cache_persists_and_is_bounded(tok):
    text = (CORPORA / "tinyshakespeare.txt").read_text()
    tok.clear_cache()
    tok.encode_ordinary(text[:300_000])
    info = tok.cache_info()
    assert info["entries"] > 0 and info["memos"] == 1 and 0 < info["bytes"] <= info["capacity"] == 64 << 20
    tok.encode_ordinary(text[300_000:600_000])
    assert tok.cache_info()["reused"] == 1, "the second call did not start from the first one's memo"
    tok.set_cache_size("10KiB")
    assert tok.cache_info()["capacity"] == 10 << 10
    tok.encode_ordinary(text)
    assert tok.cache_info()["bytes"] <= 10 << 10
    tok.set_cache_size(0)
    tok.encode_ordinary(text[:10_000])
    assert tok.cache_info()["entries"] == 0
    with pytest.raises(ValueError):
        tok.set_cache_size(-1)
    with pytest.raises(TypeError, match="a number of bytes or a str such as '64M'"):
        tok.set_cache_size(0.5)
    tok.set_cache_size("64MB")
    assert tok.cache_info()["capacity"] == 64 * 10**6
    tok.set_cache_size(64 << 20)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=6), size=st.sampled_from([0, 500, "64M"]))
def test_cache_changes_no_id(tok, texts, size):
    """Ids with the cache off equal ids with it on, too small to keep a memo,
    or cleared, whatever was encoded before."""
    tok.set_cache_size(0)
    plain = [tok.encode_ordinary(t) for t in texts]
    tok.set_cache_size(size)
    try:
        for _ in range(2):
            assert [tok.encode_ordinary(t) for t in texts] == plain
            assert tok.encode_batch(texts, disallowed_special=()) == plain
        tok.clear_cache()
        assert [tok.encode_ordinary(t) for t in texts] == plain
    finally:
        tok.set_cache_size("64M")


def test_cache_shared_by_threads_of_a_batch():
    enc = Tokenizer.from_tiktoken("cl100k_base")
    texts = [p.read_text(encoding="utf-8") for p in CORPUS_FILES] * 4
    ref = tiktoken.get_encoding("cl100k_base").encode_ordinary_batch(texts)
    for size in ("64M", 1000, 0):
        enc.set_cache_size(size)
        assert enc.encode_batch(texts, num_threads=4, disallowed_special=()) == ref


def test_threads_share_the_words_they_merge():
    """Threads that encode at once share a table of the chunks they merge
    (rust/encode/shared.rs): the second of two batches finds the first's
    words there, and the ids stay tiktoken's, on text and on multilingual
    text whose words rarely recur."""
    enc = Tokenizer.from_tiktoken("cl100k_base")
    ref_enc = tiktoken.get_encoding("cl100k_base")
    english = (CORPORA / "tinyshakespeare.txt").read_text()
    english = [english[i : i + 5000] for i in range(0, len(english), 5000)]
    udhr = (CORPORA / "multilingual_udhr.txt").read_text()
    udhr = [udhr[i : i + 2000] for i in range(0, len(udhr), 2000)]
    refs = {}  # tiktoken's ids of each list of texts, computed once
    for name, texts in (("english", english), ("udhr", udhr)):
        enc.clear_cache()
        half = len(texts) // 2
        first, second = ref_enc.encode_ordinary_batch(texts[:half]), ref_enc.encode_ordinary_batch(texts[half:])
        refs[name] = first + second
        for part, ref in ((texts[:half], first), (texts[half:], second), (texts, refs[name])):
            assert enc.encode_batch(part, num_threads=4, disallowed_special=()) == ref
        info = enc.cache_info()
        assert info["shared"] > 0 and info["shared_hits"] > 0, info
        assert info["bytes"] <= info["capacity"], info
    # Four threads share from their first call, the calling thread's memo
    # too (the binding counts it: one of the call's threads, but no pool
    # thread), so they find each other's words at once; two threads, whose
    # memos each hold half of what a call meets, share nothing (pool.rs,
    # SHARE_FROM).
    for threads in (4, 2):
        fresh = Tokenizer.from_tiktoken("cl100k_base")
        assert fresh.encode_batch(english, num_threads=threads, disallowed_special=()) == refs["english"]
        info = fresh.cache_info()
        if threads == 4:
            assert info["shared"] > 0 and info["shared_hits"] > 0, info
        else:
            assert (info["shared"], info["shared_hits"]) == (0, 0), info
    # One thread alone makes no shared table; with the cache off there is none.
    one = Tokenizer.from_tiktoken("cl100k_base")
    one.encode_batch(english, num_threads=1)
    assert one.cache_info()["shared"] == 0
    enc.set_cache_size(0)
    enc.encode_batch(english, num_threads=4)
    assert (enc.cache_info()["shared"], enc.cache_info()["bytes"]) == (0, 0)


def test_import_needs_no_numpy_for_this_module():
    assert "numpy" not in bpe._tokenizer.bulk.__dict__


def test_numpy_ids_are_lent_without_a_copy(tok):
    """encode_to_numpy's array is over the ids the core wrote (a buffer the
    array keeps alive), writable as before, and equal to encode's ids."""
    import gc

    text = (CORPORA / "tinyshakespeare.txt").read_text()[:50_000]
    a = tok.encode_to_numpy(text)
    assert a.dtype == np.uint32 and a.flags.writeable
    gc.collect()
    assert a.tolist() == tok.encode(text)
    view = memoryview(tok._core.encode_u32("hello world", [], []))
    assert (view.format, view.itemsize, view.tolist()) == ("I", 4, tok.encode("hello world"))
    a[0] = 7
    assert a[0] == 7
