"""BPE-dropout: ``encode(text, dropout=p, seed=s)`` and ``bpe encode --dropout``.

Invariants: every segmentation decodes back to the text; ``dropout=0`` is
``encode``; a seed gives the same ids every time. And a differential check
of the slow path: its merge loop with no draws (p = 0, called on the core
directly) gives ``encode``'s ids on trained vocabularies.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

import bpe
from bpe import Tokenizer
from conftest import CORPORA, require_vocab

CORPUS = (CORPORA / "multilingual_udhr.txt").read_text()[:100_000] + (CORPORA / "emoji-test.txt").read_text()[:30_000]
# Special-token text is encoded as text here (AS_TEXT): the policy itself is
# tested in test_special_tokens_policy.
texts = st.one_of(st.text(max_size=120), st.lists(st.sampled_from(["<|endoftext|>", "<|pad|>", "a b"])).map("".join))
AS_TEXT = {"disallowed_special": ()}
probabilities = st.floats(0.0, 0.99)


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(CORPUS, 1500, special_tokens=["<|endoftext|>", "<|pad|>"])


@pytest.fixture(scope="module")
def cl100k():
    require_vocab("cl100k_base")
    return Tokenizer.from_tiktoken("cl100k_base")


@given(texts, probabilities, st.integers(0, 2**64 - 1))
def test_decodes_back(tok, text, p, seed):
    assert tok.decode(tok.encode(text, dropout=p, seed=seed, **AS_TEXT)) == text


@given(texts, st.integers(-(2**70), 2**70))
def test_same_seed_same_ids(tok, text, seed):
    first = tok.encode(text, dropout=0.3, seed=seed, **AS_TEXT)
    assert tok.encode(text, dropout=0.3, seed=seed, **AS_TEXT) == first
    tok.encode("something else in between", dropout=0.3, seed=seed + 1)
    assert tok.encode(text, dropout=0.3, seed=seed, **AS_TEXT) == first


@given(texts)
def test_zero_is_encode(tok, text):
    assert tok.encode(text, dropout=0, **AS_TEXT) == tok.encode(text, **AS_TEXT)
    assert tok.encode(text, dropout=0.0, seed=5, allowed_special="all") == tok.encode(text, allowed_special="all")


@given(texts)
def test_slow_path_without_draws_is_encode(tok, text):
    # The dropout merge loop itself, with p = 0: plain BPE from bytes.
    assert tok._core.encode_dropout(text, [], 0.0, 1) == tok.encode_ordinary(text)


def test_slow_path_without_draws_on_real_text(tok):
    text = CORPUS[-20_000:]
    assert tok._core.encode_dropout(text, [], 0.0, 1) == tok.encode_ordinary(text)


@given(texts, probabilities)
def test_cl100k_decodes_back(cl100k, text, p):
    ids = cl100k.encode(text, dropout=p, seed=7, **AS_TEXT)
    assert cl100k.decode(ids) == text and all(i in cl100k.vocab for i in ids)


def test_dropout_segments_more_and_varies(tok):
    text = CORPUS[:5000]
    plain = tok.encode(text)
    runs = [tok.encode(text, dropout=0.1, seed=s) for s in range(3)]
    assert all(len(r) > len(plain) for r in runs)
    assert runs[0] != runs[1]  # fixed seeds: the same ids on every run of the test
    # Near 1 almost nothing merges.
    assert len(tok.encode(text, dropout=0.999, seed=1)) > 0.9 * len(text.encode())


def test_unseeded_calls_draw_afresh(tok):
    """Without a seed each call draws its own (a seed from os.urandom). Two
    calls give the same ids only if their seeds collide (2**-64) or their
    draws agree on every chunk. The text is m chunks of one two-byte token
    (one merge offered, taken with probability 1 - p, skipped with p), apart
    by newlines (one byte, nothing drawn), so the most likely segmentation
    has probability max(p, 1 - p)**m: the test fails by chance with
    probability at most 2**-64 + 0.5**200, about 5e-20."""
    pair = next(b for b in tok.vocab.values() if len(b) == 2 and bytes(b).isalpha())
    m, p = 200, 0.5
    text = (pair.decode() + "\n") * m
    assert bpe.pretokenize(text, tok.pattern) == [pair.decode(), "\n"] * m  # the premise: m chunks of one merge
    assert len(tok.encode(pair.decode())) == 1
    chance = 2.0**-64 + max(p, 1 - p) ** m
    assert chance < 1e-19
    first = tok.encode(text, dropout=p)
    assert tok.encode(text, dropout=p) != first
    # What is not drawn stays the same: every call decodes back to the text.
    assert tok.decode(first) == text


def test_special_tokens_policy(tok):
    with pytest.raises(ValueError, match="disallowed"):
        tok.encode("a<|pad|>b", dropout=0.5, seed=1)
    ids = tok.encode("a<|pad|>b", dropout=0.5, seed=1, allowed_special={"<|pad|>"})
    assert ids == [97, tok.special_tokens["<|pad|>"], 98]
    as_text = tok.encode("<|pad|>", dropout=0.5, seed=1, disallowed_special=())
    assert tok.special_tokens["<|pad|>"] not in as_text and tok.decode(as_text) == "<|pad|>"


def test_surrogates_as_encode_does(tok):
    text = "a\ud800b"
    assert tok.decode(tok.encode(text, dropout=0.5, seed=2)) == tok.decode(tok.encode(text))


@pytest.mark.parametrize("p, error, match", [
    (1.0, ValueError, "below 1"), (-0.1, ValueError, "at least 0"), (float("nan"), ValueError, "at least 0"),
    ("0.1", TypeError, "must be a number"), (True, TypeError, "must be a number"),
])
def test_bad_dropout(tok, p, error, match):
    with pytest.raises(error, match=match):
        tok.encode("hello", dropout=p)


def test_bad_seed_and_threads(tok):
    with pytest.raises(TypeError, match="seed must be an int"):
        tok.encode("hello", dropout=0.1, seed=1.5)
    with pytest.raises(ValueError, match="one thread"):
        tok.encode("hello", dropout=0.1, num_threads=4)
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(b"hello", dropout=0.1)


def test_cli(tmp_path, tok):
    tok.save(tmp_path / "t.bpe")
    docs = [CORPUS[:3000], CORPUS[3000:5000]]
    for k, d in enumerate(docs):
        (tmp_path / f"d{k}.txt").write_text(d)
    run = [sys.executable, "-m", "bpe", "encode", "-t", str(tmp_path / "t.bpe"), "--dropout", "0.2", "--seed", "9"]
    out = subprocess.run([*run, str(tmp_path / "d0.txt"), str(tmp_path / "d1.txt"), "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    got = [json.loads(line) for line in out.splitlines()]
    assert got == [tok.encode(d, dropout=0.2, seed=9 + k) for k, d in enumerate(docs)]
    text = subprocess.run([*run, "--text", "hello world"], capture_output=True, text=True, check=True).stdout
    assert list(map(int, text.split())) == tok.encode("hello world", dropout=0.2, seed=9)
    subprocess.run([*run, str(tmp_path / "d0.txt"), "-o", str(tmp_path / "ids.npy")], check=True)
    np = pytest.importorskip("numpy")
    assert np.load(tmp_path / "ids.npy").tolist() == tok.encode(docs[0], dropout=0.2, seed=9)
    for extra, code, match in [(["--dropout", "1"], 1, "below 1"), (["--dropout", "x"], 2, "invalid float")]:
        bad = subprocess.run([*run, *extra, str(tmp_path / "d0.txt")], capture_output=True, text=True)
        assert bad.returncode == code and match in bad.stderr, bad.stderr
    bad = subprocess.run([sys.executable, "-m", "bpe", "encode", "-t", str(tmp_path / "t.bpe"), "--seed", "1",
                          "--text", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--seed goes with --dropout" in bad.stderr


def test_dataset(tmp_path, tok):
    from bpe.data import load_meta

    tok.save(tmp_path / "t.bpe")
    docs = [tmp_path / "d0.txt", tmp_path / "d1.txt"]
    docs[0].write_text("\n".join(CORPUS[:20_000].splitlines()[:200]) + "\n")
    docs[1].write_text("\n".join(CORPUS[40_000:60_000].splitlines()[:200]) + "\n")

    def make(out, *extra):
        subprocess.run([sys.executable, "-m", "bpe", "encode", "-t", str(tmp_path / "t.bpe"), *map(str, docs), "-o",
                        str(tmp_path / out), "-q", *extra], check=True)
        return {s: (tmp_path / out / f"{s}.bin").read_bytes() for s in ("train", "val")}

    plain = make("plain")
    one, again, other = (make(d, "--dropout", "0.2", "--seed", s) for d, s in (("a", "9"), ("b", "9"), ("c", "10")))
    assert one == again and one != other and one["train"] != plain["train"]
    np = pytest.importorskip("numpy")
    for split in ("train", "val"):
        ids = np.frombuffer(one[split], dtype="<u2").tolist()
        assert tok.decode(ids) == tok.decode(np.frombuffer(plain[split], dtype="<u2").tolist())
        assert len(ids) > len(plain[split]) // 2
    assert load_meta(tmp_path / "a")["dropout"] == {"p": 0.2, "seed": 9}
