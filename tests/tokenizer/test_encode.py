"""Encoding and decoding: round trips, special tokens, long pieces, errors."""

import gc
import sys
import threading
import time
import weakref

import pytest
from hypothesis import given, strategies as st

import bpe
from bpe import Tokenizer, reference
from conftest import CORPORA, CORPUS_FILES

SPECIALS = ("<|endoftext|>", "<|fim|>")


@pytest.fixture(scope="module")
def tok():
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:300_000]
    text += (CORPORA / "multilingual_udhr.txt").read_text()[:200_000]
    return Tokenizer.train(text, 1200, special_tokens=SPECIALS, progress=False)


@given(text=st.text())  # any Unicode without lone surrogates
def test_round_trip(tok, text):
    assert tok.decode(tok.encode(text, allowed_special="all")) == text
    assert tok.decode_bytes(tok.encode_ordinary(text)) == text.encode("utf-8")


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpora_round_trip_and_reference(tok, path):
    text = path.read_text(encoding="utf-8")
    ids = tok.encode_ordinary(text)
    assert tok.decode(ids) == text
    # The spec, on a slice (the reference is slow).
    ranks = {b: i for i, b in tok.vocab.items()}
    assert tok.encode_ordinary(text[:20_000]) == reference.encode(text[:20_000], ranks, tok.pattern)


def test_special_tokens_default_disallowed(tok):
    with pytest.raises(ValueError, match=r"allowed_special=\{'<\|endoftext\|>'\}") as e:
        tok.encode("hello <|endoftext|> world")
    assert "encode_ordinary" in str(e.value)


def test_special_tokens_allowed(tok):
    eot, fim = tok.special_tokens["<|endoftext|>"], tok.special_tokens["<|fim|>"]
    ids = tok.encode("a<|endoftext|>b<|fim|>", allowed_special="all")
    assert ids == tok.encode("a") + [eot] + tok.encode("b") + [fim]
    ids = tok.encode("a<|endoftext|>b<|fim|>", allowed_special={"<|fim|>"}, disallowed_special=())
    assert ids == tok.encode_ordinary("a<|endoftext|>b") + [fim]
    # Only the allowed one is special; the other is refused unless disallowed_special says otherwise.
    with pytest.raises(ValueError, match="<\\|endoftext\\|>"):
        tok.encode("a<|endoftext|>b<|fim|>", allowed_special={"<|fim|>"})
    # disallowed_special=() turns the check off: special text becomes ordinary text.
    assert tok.encode("x<|fim|>", disallowed_special=()) == tok.encode_ordinary("x<|fim|>")
    assert tok.decode(ids) == "a<|endoftext|>b<|fim|>"


@given(
    parts=st.lists(st.one_of(st.sampled_from(SPECIALS), st.text(max_size=10)), max_size=8),
)
def test_special_tokens_hypothesis(tok, parts):
    text = "".join(parts)
    ids = tok.encode(text, allowed_special="all")
    assert tok.decode(ids) == text
    # Split by hand at the special tokens: the same ids.
    expected, rest = [], text
    while rest:
        hits = [(rest.find(s), s) for s in SPECIALS if s in rest]
        if not hits:
            expected += tok.encode_ordinary(rest)
            break
        pos, s = min(hits)
        expected += tok.encode_ordinary(rest[:pos]) + [tok.special_tokens[s]]
        rest = rest[pos + len(s):]
    assert ids == expected


@given(parts=st.lists(st.one_of(st.sampled_from(SPECIALS), st.text(max_size=10)), max_size=6))
def test_default_policy_fast_path_equals_general_path(tok, parts):
    # encode(text) with the default arguments takes a one-call fast path; it
    # must behave exactly like the general path with the same policy spelled out.
    text = "".join(parts)

    def outcome(**policy):
        try:
            return tok.encode(text, **policy)
        except ValueError as e:
            return str(e)

    fast = outcome()
    assert fast == outcome(allowed_special=set(), disallowed_special=set(SPECIALS))
    if any(s in text for s in SPECIALS):
        first = min((text.find(s), s) for s in SPECIALS if s in text)[1]
        assert isinstance(fast, str) and repr(first) in fast
    else:
        assert fast == tok.encode_ordinary(text)


def test_encode_to_numpy(tok):
    np = pytest.importorskip("numpy")
    text = (CORPORA / "multilingual_udhr.txt").read_text()[:100_000] + "<|fim|>"
    arr = tok.encode_to_numpy(text, disallowed_special=())
    assert arr.dtype == np.uint32 and arr.ndim == 1
    assert arr.tolist() == tok.encode(text, disallowed_special=())
    arr[0] = 7  # writable: the array owns its buffer
    with_special = tok.encode_to_numpy("a<|fim|>", allowed_special="all")
    assert with_special.tolist() == tok.encode("a<|fim|>", allowed_special="all")
    with pytest.raises(ValueError, match="<\\|fim\\|>"):
        tok.encode_to_numpy("a<|fim|>")
    assert tok.encode_to_numpy("").tolist() == []
    assert tok.encode_to_numpy("a\ud800b").tolist() == tok.encode("a\ufffdb")


def test_lone_surrogates_replaced_like_tiktoken(tok):
    assert tok.encode("a\ud800b") == tok.encode("a\ufffdb")
    assert tok.encode_batch(["a\udfffb"]) == [tok.encode("a\ufffdb")]


def test_long_piece_is_not_quadratic(tok):
    # One million identical letters are one chunk; the O(n²) merge would take
    # hours. Correctness: the ids decode back, and agree with the reference's
    # merge on a shorter run (the heap and scan merges switch at 128 bytes).
    t0 = time.perf_counter()
    ids = tok.encode("a" * 1_000_000)
    assert time.perf_counter() - t0 < 30  # generous: O(n log n) takes well under a second
    assert tok.decode(ids) == "a" * 1_000_000
    ranks = {b: i for i, b in tok.vocab.items()}
    for n in (127, 128, 129, 1000, 3001):
        for s in ("a" * n, "ab" * n, "é" * n, "🙂" * n):
            assert tok.encode_ordinary(s) == reference.encode(s, ranks, tok.pattern)


def test_encode_batch(tok):
    texts = [p.read_text()[:50_000] for p in CORPUS_FILES] * 3
    expected = [tok.encode_ordinary(t) for t in texts]
    assert tok.encode_batch(texts) == expected
    assert tok.encode_batch(texts, num_threads=1) == expected
    assert tok.encode_batch(texts, num_threads=2) == expected
    with pytest.raises(ValueError, match=r"texts\[1\] contains the special token '<\|fim\|>'"):
        tok.encode_batch(["ok", "not <|fim|> ok"])
    # The first text holding a disallowed token is the one named.
    batch = ["ok"] * 50 + ["<|fim|>"] + ["ok"] * 50 + ["x<|fim|>"]
    with pytest.raises(ValueError, match=r"texts\[50\] contains"):
        tok.encode_batch(batch, num_threads=2)
    assert tok.encode_batch(batch, disallowed_special=())[50] == tok.encode_ordinary("<|fim|>")
    assert tok.encode_batch(batch, allowed_special={"<|fim|>"})[50] == [tok.special_tokens["<|fim|>"]]
    assert tok.encode_batch(["a<|fim|>"], allowed_special="all")[0][-1] == tok.special_tokens["<|fim|>"]
    with pytest.raises(TypeError, match="list of str"):
        tok.encode_batch("one text")



def test_lists_of_ids_are_untracked_and_keep_what_they_hold(tok):
    # Every encode method returns its lists hidden from the cyclic GC (lists
    # of ints form no cycles; tracked, kept results are traversed id by id at
    # every collection). Hidden is safe only if the collector treats what such
    # a list refers to as referenced from outside: an object put into one must
    # survive gc.collect() while the list lives, and go with the list.
    class Marker:
        pass

    texts = [p.read_text()[:20_000] for p in CORPUS_FILES] * 40
    expected = [tok.encode(t) for t in texts]
    singles = [tok.encode(texts[0]), tok.encode_ordinary(texts[0]), tok.encode("hi"),
               tok.encode("<|endoftext|>", allowed_special="all"), tok.encode_ordinary("")]
    assert not any(gc.is_tracked(ids) for ids in singles)
    for threads in (1, 2):
        lists = tok.encode_batch(texts, num_threads=threads)
        assert lists == expected
        assert gc.is_tracked(lists) and not any(gc.is_tracked(ids) for ids in lists)
        marker = Marker()
        marker.self = marker  # itself in a cycle, so only the collector could free it
        alive = weakref.ref(marker)
        lists[-1].append(marker)
        del marker
        gc.collect()
        assert alive() is not None and lists[-1][-1] is alive()
        assert list(lists[-1]) == lists[-1] and gc.is_tracked(list(lists[-1]))
        del lists
        gc.collect()
        assert alive() is None

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", ["small", "large"])
def test_encode_batch_counts_a_reference_per_item(tok, threads, size):
    # encode_batch writes the items of its lists itself. Past one id per
    # vocabulary entry it writes them on all its threads, and raises each
    # int's reference count once per id, from per-thread tallies; below, one
    # count per item. A count too low would free an int a list still holds;
    # too high, leak it. Both show in sys.getrefcount of the ints that encode
    # returns (the tokenizer shares one int object per id).
    texts = [p.read_text()[:20_000] for p in CORPUS_FILES] * 10
    if size == "small":
        texts = [t[:300] for t in texts[: len(CORPUS_FILES)]]
    expected = [tok.encode(t) for t in texts]
    assert (sum(map(len, expected)) > 2 * tok.n_vocab) == (size == "large")
    ints = {i: ids[k] for ids in expected for k, i in enumerate(ids)}  # one object per id
    # Ids above Python's own small ints (-5..256), whose counts anything may
    # change (and which 3.12 makes immortal); counts kept in lists, by
    # position: a dict keyed by the ids would itself refer to each of them.
    objs = [x for i, x in ints.items() if i > 256]
    assert len(objs) > (500 if size == "large" else 20)
    n = [sum(ids.count(x) for ids in expected) for x in objs]
    before = [sys.getrefcount(x) for x in objs]
    got = tok.encode_batch(texts, num_threads=threads)
    assert got == expected
    shared = all(got[d][k] is ints[i] for d, ids in enumerate(got) for k, i in enumerate(ids))
    after = [sys.getrefcount(x) for x in objs]  # (not in a zip: its tuple refers to x)
    added = [a - b for a, b in zip(after, before)]
    assert shared
    assert added == n
    del got
    assert [sys.getrefcount(x) for x in objs] == before


@pytest.mark.parametrize("size", ["small", "large"])
def test_encode_counts_a_reference_per_item(tok, size):
    # encode and encode_ordinary write their list's items themselves too: one
    # count per item below one id per vocabulary entry, past it a tally per
    # id. "large" is every corpus file at once (a million ids); with
    # num_threads, and as a batch's one text, its list's items are written by
    # several threads, each a stretch of them with its own tally.
    text = "".join(p.read_text() for p in CORPUS_FILES)
    if size == "small":
        text = text[:300]
    expected = tok.encode_ordinary(text)
    assert (len(expected) > 2 * tok.n_vocab) == (size == "large")
    ints = {}
    for x in expected:
        ints.setdefault(x, x)  # the object for each id (shared, checked below)
    objs = [x for i, x in ints.items() if i > 256]  # (see the test above)
    assert len(objs) > 20
    n = [expected.count(x) for x in objs]
    calls = (
        tok.encode_ordinary,
        tok.encode,
        lambda t: tok.encode(t, num_threads=2),
        lambda t: tok.encode(t, num_threads=3),
        lambda t: tok.encode_batch([t], num_threads=2)[0],
        lambda t: tok.encode_batch(["", t, "x"], num_threads=3)[1],
    )
    for encode in calls:
        before = [sys.getrefcount(x) for x in objs]
        got = encode(text)
        assert got == expected and all(x is ints[x] for x in got)
        after = [sys.getrefcount(x) for x in objs]
        assert [a - b for a, b in zip(after, before)] == n
        del got
        assert [sys.getrefcount(x) for x in objs] == before


def test_threads_share_one_tokenizer(tok):
    texts = [p.read_text()[:30_000] for p in CORPUS_FILES]
    expected = [tok.encode_ordinary(t) for t in texts]
    results, errors = [], []

    def work():
        try:
            results.append([tok.encode_ordinary(t) for t in texts])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [expected] * 8


def test_decode(tok):
    ids = tok.encode("naïve café")
    assert tok.decode(ids) == "naïve café"
    b = tok.decode_bytes(ids)
    # Cut mid-character: every bytes.decode error handler works.
    cut = b[: b.index("ï".encode()) + 1]
    cut_ids = tok.encode_ordinary(cut.decode("utf-8", "ignore"))
    partial = cut_ids + [0xC3]  # the byte token 0xC3 alone: half of a 2-byte character
    assert tok.decode(partial) == cut.decode("utf-8", "ignore") + "\ufffd"
    assert tok.decode(partial, errors="ignore") == cut.decode("utf-8", "ignore")
    assert tok.decode(partial, errors="backslashreplace").endswith("\\xc3")
    assert tok.decode(partial, errors="surrogateescape").endswith("\udcc3")
    with pytest.raises(UnicodeDecodeError):
        tok.decode(partial, errors="strict")
    assert tok.token_bytes(ids[0]) == tok.vocab[ids[0]]
    assert tok.token_bytes(tok.special_tokens["<|fim|>"]) == b"<|fim|>"
    assert tok.decode([]) == ""


@pytest.mark.parametrize("bad", [[10**6], [-1], [2**40], ["x"], [1.5]])
def test_decode_bad_ids(tok, bad):
    with pytest.raises((ValueError, TypeError), match="token id|ints in"):
        tok.decode(bad)


def test_token_bytes_bad_id(tok):
    with pytest.raises(ValueError, match=f"unknown token id {tok.n_vocab}"):
        tok.token_bytes(tok.n_vocab)
    with pytest.raises(ValueError):
        tok.token_bytes(-1)


def test_panic_becomes_python_exception():
    # A Rust panic must never take down the interpreter: it surfaces as an
    # ordinary RuntimeError that `except Exception` catches.
    with pytest.raises(RuntimeError, match="internal error in the bpe Rust core: provoked panic"):
        bpe._core._panic_for_tests()
