"""``shrink(vocab_size)`` (``shrink(ordinary_tokens=n)``) and several sizes from
one training (``train(vocab_size=[...])``, ``bpe train --vocab 8k,32k``): each
size is byte for byte the tokenizer that training that size alone gives.
``shrink`` counts ids as ``train`` does, special tokens included."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from bpe import Tokenizer
from bpe.cli import build_parser
from conftest import CORPORA, require_vocab

CORPUS = (CORPORA / "multilingual_udhr.txt").read_text()[:150_000] + (CORPORA / "tinyshakespeare.txt").read_text()[:50_000]
SIZES = [300, 700, 1200]


@pytest.fixture(scope="module")
def largest():
    return Tokenizer.train(CORPUS, max(SIZES))


@pytest.mark.parametrize("specials", [("<|endoftext|>",), (), ("<|a|>", "<|b|>")])
def test_sizes_equal_training_each(specials):
    toks = Tokenizer.train(CORPUS, SIZES, special_tokens=specials)
    assert [t.n_vocab for t in toks] == SIZES
    for v, tok in zip(SIZES, toks):
        alone = Tokenizer.train(CORPUS, v, special_tokens=specials)
        assert tok._dumps() == alone._dumps()
        assert tok == alone


def test_shrink_equals_training(largest):
    """``shrink(v)`` is ``train(..., v)``: ``v`` ids in all, the special token included."""
    for v in (256 + 1, 512, 999):
        assert largest.shrink(v)._dumps() == Tokenizer.train(CORPUS, v)._dumps()
        assert largest.shrink(ordinary_tokens=v - 1) == largest.shrink(v)
    assert largest.shrink(1200) == largest == largest.shrink(ordinary_tokens=1199)
    assert largest.shrink(257).merges == {} and largest.shrink(ordinary_tokens=256).merges == {}
    assert largest.shrink(257).n_vocab == 257


@given(st.integers(256, 1199), st.text(max_size=80))
@settings(max_examples=30)
def test_shrunk_ids_are_the_first(largest, n, text):
    small = largest.shrink(ordinary_tokens=n)
    assert small.n_vocab == n + 1 and small.special_tokens == {"<|endoftext|>": n}
    ids = small.encode_ordinary(text)
    assert all(i < n for i in ids)
    assert small.decode(ids) == text
    assert all(small.vocab[i] == largest.vocab[i] for i in range(n))


def test_running_out_keeps_every_size_exact():
    text = "the cat sat on the mat " * 20
    with pytest.warns(UserWarning):
        toks = Tokenizer.train(text, [270, 5000])
    with pytest.warns(UserWarning):
        alone = Tokenizer.train(text, 5000)
    assert toks[1]._dumps() == alone._dumps()
    with pytest.warns(UserWarning):  # (this corpus has 13 merges in all)
        assert toks[0]._dumps() == Tokenizer.train(text, 270)._dumps()


def test_shrink_rank_vocabulary():
    require_vocab("cl100k_base")
    cl = Tokenizer.from_tiktoken("cl100k_base")
    small = cl.shrink(ordinary_tokens=50_000)
    assert not small._from_merges
    assert all(small.vocab[i] == cl.vocab[i] for i in range(50_000)) and len(small.vocab) == 50_000
    assert list(small.special_tokens.values()) == list(range(50_000, 50_005))
    assert cl.shrink(50_005) == small and small.n_vocab == 50_005
    text = "Hello, world! Shrinking keeps the first ids."
    assert small.decode(small.encode(text)) == text


def test_shrink_errors(largest):
    with pytest.raises(ValueError, match="the 256 single bytes and the 1 special tokens, so vocab_size must be at least 257"):
        largest.shrink(256)
    with pytest.raises(ValueError, match="vocab_size must be at most 1200"):
        largest.shrink(1201)
    with pytest.raises(ValueError, match="ordinary_tokens must be at least 256"):
        largest.shrink(ordinary_tokens=255)
    with pytest.raises(ValueError, match="has 1199 ordinary tokens; ordinary_tokens must be at most 1199"):
        largest.shrink(ordinary_tokens=1200)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        largest.shrink(300.0)
    with pytest.raises(TypeError, match="ordinary_tokens must be an int"):
        largest.shrink(ordinary_tokens=True)
    for call in (lambda: largest.shrink(), lambda: largest.shrink(300, ordinary_tokens=299)):
        with pytest.raises(TypeError, match="one of the two"):
            call()
    with pytest.raises(TypeError, match="non-empty list of ints"):
        Tokenizer.train(CORPUS, [])
    with pytest.raises(TypeError, match="non-empty list of ints"):
        Tokenizer.train(CORPUS, [300, "1k"])
    with pytest.raises(ValueError, match="too small"):
        Tokenizer.train(CORPUS, [200, 300])


def test_cli_sizes(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(CORPUS)
    out = tmp_path / "tok-{vocab}.bpe"
    subprocess.run([sys.executable, "-m", "bpe", "train", str(corpus), "--vocab", "300,700,1200", "-o", str(out),
                    "-q"], check=True)
    for v in SIZES:
        alone = tmp_path / f"alone-{v}.bpe"
        subprocess.run([sys.executable, "-m", "bpe", "train", str(corpus), "--vocab", str(v), "-o", str(alone), "-q"],
                       check=True)
        assert (tmp_path / f"tok-{v}.bpe").read_bytes() == alone.read_bytes()
        assert Tokenizer.load(alone) == Tokenizer.train(CORPUS, v)
    bad = subprocess.run([sys.executable, "-m", "bpe", "train", str(corpus), "--vocab", "300,700", "-o",
                          str(tmp_path / "x.bpe")], capture_output=True, text=True)
    assert bad.returncode == 2 and "put {vocab} in -o" in bad.stderr


@pytest.mark.parametrize("text, sizes", [
    ("50k", [50_000]), ("50,000", [50_000]), ("1,000,000", [1_000_000]), ("8k,32k,50k", [8000, 32_000, 50_000]),
    ("300,400,500", [300, 400, 500]), ("1000,2000", [1000, 2000]), ("32Ki,64Ki", [32768, 65536]),
])
def test_vocab_sizes_parse(text, sizes):
    args = build_parser().parse_args(["train", "c.txt", "--vocab", text])
    assert args.vocab == sizes


@pytest.mark.parametrize("text", ["8k,,32k", "8k,", "x,8k"])
def test_vocab_sizes_refused(text):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "c.txt", "--vocab", text])
