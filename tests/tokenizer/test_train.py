"""Training: the Rust core against the pure-Python reference (the spec)."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

import bpe
from bpe import Tokenizer, reference
from conftest import CORPORA

WHOLE = r"[\s\S]+"  # a pattern that matches the whole text: no splitting


def rust_merges(texts, vocab_size, pattern):
    """The core's merge list, as (left, right, new) triples."""
    trainer = bpe._core.Trainer(pattern)
    trainer.feed_texts(list(texts))
    pairs, tokens = trainer.train(vocab_size, False)
    merges = [(l, r, n) for (l, r), n in pairs.items()]
    # The token bytes the core returns are those the merges make.
    vocab = {i: bytes([i]) for i in range(256)}
    for l, r, n in merges:
        vocab.setdefault(n, vocab[l] + vocab[r])
    assert tokens == vocab and list(tokens) == list(range(len(tokens)))
    return merges


def test_textbook_example():
    tok = Tokenizer.train("aaabdaaabac", 259, pattern=WHOLE, special_tokens=())
    assert tok.merges == {(97, 97): 256, (97, 98): 257, (256, 257): 258}
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.vocab[258] == b"aaab"


def test_gpt2_sizes():
    # 256 bytes + merges + 1 special = vocab_size; the special takes the last id.
    tok = Tokenizer.train((CORPORA / "tinyshakespeare.txt").read_text()[:200_000], 600)
    assert tok.n_vocab == 600
    assert len(tok.merges) == 600 - 256 - 1
    assert tok.special_tokens == {"<|endoftext|>": 599}
    assert sorted(tok.vocab) == list(range(599))
    assert len(set(tok.vocab.values())) == 599


# Small alphabets make many repeated pairs and many ties: the hard cases for
# the tie-break and for incremental count updates.
ALPHABET = st.sampled_from(["a", "b", "c", " ", "\n", "ab", "é", "日", "1", "'s", "  "])
DOCS = st.lists(st.lists(ALPHABET, max_size=40).map("".join), min_size=1, max_size=8)


@given(docs=DOCS, extra=st.integers(0, 60), pattern=st.sampled_from(["gpt2", "gpt4", "gpt4o", WHOLE]))
def test_same_merges_as_reference(docs, extra, pattern):
    pat = bpe.resolve_pattern(pattern)
    ours = rust_merges(docs, 256 + extra, pat)
    spec = reference.train(docs, 256 + extra, pat)
    assert [tuple(m) for m in ours] == [tuple(m) for m in spec]


@pytest.mark.filterwarnings("ignore:the corpus ran out")
@given(docs=DOCS, extra=st.integers(0, 40), text=st.text(max_size=60))
def test_same_ids_as_reference(docs, extra, text):
    assume(any(docs))  # an empty corpus is an error (tests/reliability/test_bad_input.py)
    tok = Tokenizer.train(docs, 256 + extra, special_tokens=())
    ranks = {b: i for i, b in tok.vocab.items()}
    assert tok.encode(text) == reference.encode(text, ranks, tok.pattern)
    for doc in docs:
        assert tok.encode(doc) == reference.encode(doc, ranks, tok.pattern)


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1))
def test_reference_agrees_on_real_text(seed):
    # A random slice of real prose, enough merges to exercise the heap.
    text = (CORPORA / "tinyshakespeare.txt").read_text()
    start = seed % (len(text) - 3000)
    doc = text[start : start + 3000]
    pat = bpe.GPT4_PATTERN
    assert [tuple(m) for m in rust_merges([doc], 256 + 80, pat)] == [
        tuple(m) for m in reference.train([doc], 256 + 80, pat)
    ]


def test_sources_are_equivalent(tmp_path):
    # One text given as str, as a path, as a list of paths, or as an iterable
    # of lines split at safe points gives the same merges.
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:300_000]
    f = tmp_path / "a.txt"
    f.write_text(text, encoding="utf-8")
    a = Tokenizer.train(text, 800)
    b = Tokenizer.train(f, 800)
    c = Tokenizer.train([f], 800)
    d = Tokenizer.train(iter([text]), 800)
    assert a == b == c == d


def test_file_streaming_cuts_blocks_exactly(tmp_path, monkeypatch):
    # A file of many reads (1 MiB each, counted by several threads) is cut at
    # safe points; the merges must equal those of the whole text counted at once.
    text = (CORPORA / "tinyshakespeare.txt").read_text()
    big = text * 31  # ~34.6 MB: dozens of reads
    f = tmp_path / "big.txt"
    f.write_text(big, encoding="utf-8")
    from_file = Tokenizer.train(f, 400, progress=False)
    trainer = bpe._core.Trainer(bpe.GPT4_PATTERN)
    trainer.feed_texts([text] * 31)  # the same chunks: a document boundary sits at a safe cut
    merges, _ = trainer.train(399, False)
    assert list(from_file.merges.items()) == list(merges.items())


def test_trainer_hands_over_the_encoder_it_built_or_builds_another():
    # `train` builds the encoder for the special tokens it is given while it
    # learns; `encoder` hands it over when asked for those same ones, else
    # builds one for the others. Both encode the ordinary text alike.
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:300_000]
    trainer = bpe._core.Trainer(bpe.GPT4_PATTERN)
    trainer.feed_texts([text])
    merges, vocab = trainer.train(1000, False, ["<|endoftext|>", "<|fim|>"])
    n = len(vocab)
    assert n == 1000
    built = trainer.encoder({"<|endoftext|>": n, "<|fim|>": n + 1})
    other = trainer.encoder({"<|x|>": n})
    ordinary = reference.encode(text[:3000], {b: i for i, b in vocab.items()}, bpe.GPT4_PATTERN)
    assert built.encode_ordinary(text[:3000]) == other.encode_ordinary(text[:3000]) == ordinary
    assert built.encode("a<|fim|>b<|endoftext|>", ["<|fim|>", "<|endoftext|>"], [])[1::2] == [n + 1, n]
    assert other.encode("a<|x|>", ["<|x|>"], [])[-1] == n


def test_deterministic_across_hash_seeds_and_threads(tmp_path):
    corpus = CORPORA / "multilingual_udhr.txt"
    script = (
        "import sys, bpe; from pathlib import Path;"
        "t = bpe.Tokenizer.train(Path(sys.argv[1]), 1500, progress=False); t.save(sys.argv[2])"
    )
    outs = []
    for seed, threads in [("0", "1"), ("123", "2"), ("random", "2")]:
        out = tmp_path / f"t{seed}.bpe"
        env = dict(os.environ, PYTHONHASHSEED=seed, RAYON_NUM_THREADS=threads)
        subprocess.run([sys.executable, "-c", script, str(corpus), str(out)], check=True, env=env)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="at least 257"):
        Tokenizer.train("abc", 256)
    with pytest.raises(ValueError, match="at least 258"):
        Tokenizer.train("abc", 257, special_tokens=["<a>", "<b>"])
    with pytest.raises(ValueError, match="duplicate special tokens"):
        Tokenizer.train("abc", 300, special_tokens=["<a>", "<a>"])
    with pytest.raises(ValueError, match="unknown pattern name"):
        Tokenizer.train("abc", 300, pattern="gtp4")
    with pytest.raises(TypeError, match="item 1"):
        Tokenizer.train(["abc", 5], 300)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        Tokenizer.train(tmp_path / "nope.txt", 300)
    # A directory stands for the files under it (bpe/sources/paths.py); an empty one is an error.
    with pytest.raises(ValueError, match="is a directory with no files in it"):
        Tokenizer.train(tmp_path, 300)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello\nworld\xff\xfe")
    with pytest.raises(ValueError, match=r"bad.txt is not valid UTF-8 at byte offset 11"):
        Tokenizer.train(bad, 300)


def test_small_corpus_stops_early_with_warning():
    with pytest.warns(UserWarning, match="ran out of pairs"):
        tok = Tokenizer.train("ab ab ab", 1000)
    # "ab", " ab" are all a 3-byte corpus can make; the special follows them.
    assert tok.n_vocab == 256 + 2 + 1
    assert tok.special_tokens == {"<|endoftext|>": 258}


def test_trainer_decides_the_special_ids():
    # Special tokens take the ids after the ordinary tokens, in the order
    # given; the trainer decides them (and builds the encoder with them), and
    # Tokenizer.train reads them from it instead of working them out again.
    trainer = bpe._core.Trainer(bpe.GPT4_PATTERN)
    trainer.feed_texts([(CORPORA / "tinyshakespeare.txt").read_text()[:100_000]])
    _, vocab = trainer.train(400, False, ["<|fim|>", "<|endoftext|>"])
    n = len(vocab)
    assert trainer.special_ids() == [("<|fim|>", n), ("<|endoftext|>", n + 1)]
    tok = Tokenizer.train((CORPORA / "tinyshakespeare.txt").read_text()[:100_000], 402,
                          special_tokens=["<|fim|>", "<|endoftext|>"], progress=False)
    assert list(tok.special_tokens.items()) == [("<|fim|>", n), ("<|endoftext|>", n + 1)]
