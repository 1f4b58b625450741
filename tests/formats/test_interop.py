"""Interop: tiktoken and HuggingFace files and objects, both ways."""

import functools
import json
import os
import pickle
from pathlib import Path

import pytest
import tiktoken
import tokenizers
from hypothesis import HealthCheck, given, settings, strategies as st

import bpe
from bpe import Tokenizer
from conftest import CORPORA, CORPUS_FILES, ENCODINGS, require_vocab
import fetch_vocabs

SPECIALS = ["<|endoftext|>", "<|pad|>"]


@functools.lru_cache(maxsize=None)
def trained(pattern):
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:400_000] + (CORPORA / "multilingual_udhr.txt").read_text()
    return Tokenizer.train(text, 3000, pattern=pattern, special_tokens=SPECIALS, progress=False)


@functools.lru_cache(maxsize=None)
def openai(name):
    require_vocab(name)
    return Tokenizer.from_tiktoken(name)


# --- from_tiktoken -------------------------------------------------------------

@pytest.mark.parametrize("name", ENCODINGS)
def test_from_tiktoken_forms_agree(name, tmp_path):
    require_vocab(name)
    enc = tiktoken.get_encoding(name)
    by_name = openai(name)
    by_object = Tokenizer.from_tiktoken(enc)
    # A .tiktoken rank file holds no pattern: it must be given.
    rank_file = fetch_vocabs.cache_path(name)
    with pytest.raises(ValueError, match="pass pattern="):
        Tokenizer.from_tiktoken(rank_file)
    by_file = Tokenizer.from_tiktoken(rank_file, pattern=enc._pat_str, special_tokens=enc._special_tokens)
    assert by_name == by_object == by_file
    assert by_name.n_vocab == enc.n_vocab
    assert by_name.special_tokens == enc._special_tokens
    assert by_name.pattern == enc._pat_str


def test_gpt2_is_r50k():
    require_vocab("r50k_base")
    assert Tokenizer.from_tiktoken("gpt2") == openai("r50k_base")


@pytest.mark.parametrize("name", ENCODINGS)
def test_merges_are_recovered(name):
    tok = openai(name)
    merges = tok.merges
    # Every non-byte token is the merge of two tokens of lower rank, recorded in rank order.
    assert len(merges) == sum(1 for b in tok.vocab.values() if len(b) > 1)
    assert list(merges.values()) == sorted(merges.values())
    for (l, r), n in merges.items():
        assert tok.vocab[l] + tok.vocab[r] == tok.vocab[n] and l < n and r < n


def test_rank_holes_like_p50k():
    # p50k_base's ranks skip 50256 (the special token's id): make such a hole.
    require_vocab("r50k_base")
    enc = tiktoken.get_encoding("r50k_base")
    ranks = {b: (r if r < 1000 else r + 7) for b, r in enc._mergeable_ranks.items()}
    specials = {"<|endoftext|>": 1000}
    ours = Tokenizer(pattern="gpt2", special_tokens=specials, ranks=ranks)
    theirs = tiktoken.Encoding("holes", pat_str=enc._pat_str, mergeable_ranks=ranks, special_tokens=specials)
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:200_000] + "<|endoftext|>"
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.n_vocab == theirs.n_vocab
    with pytest.raises(ValueError, match="unknown token id 1001"):
        ours.decode([1001])  # a hole is not a token


def test_unrecoverable_merges_still_encode(tmp_path):
    # "abc" with neither "ab" nor "bc" in the vocabulary: no merge list exists.
    ranks = {bytes([i]): i for i in range(256)}
    ranks[b"abc"] = 256
    tok = Tokenizer(pattern="gpt2", ranks=ranks)
    theirs = tiktoken.Encoding("x", pat_str=bpe.GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    for text in ["abc", "abcd abc", "xabc"]:
        assert tok.encode(text) == theirs.encode(text)
    with pytest.raises(ValueError, match=r'token 256 \("abc"\) is not the merge of two tokens'):
        tok.merges
    with pytest.raises(ValueError, match="not the merge of two tokens"):
        tok.save_huggingface(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    tok.save(tmp_path / "t.bpe")  # our format stores ranks: no merges needed
    assert Tokenizer.load(tmp_path / "t.bpe") == tok


def test_bad_rank_inputs(tmp_path):
    with pytest.raises(ValueError, match="all 256 single bytes"):
        Tokenizer(pattern="gpt2", ranks={b"a": 0})
    ranks = {bytes([i]): i for i in range(256)}
    with pytest.raises(ValueError, match="both have rank 5"):
        Tokenizer(pattern="gpt2", ranks={**ranks, b"ab": 5})
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("YQ== 0\nnot-base64!! 1\n")
    with pytest.raises(ValueError, match="bad.tiktoken: line 2"):
        Tokenizer.from_tiktoken(bad, pattern="gpt2")
    with pytest.raises(TypeError, match="tiktoken.Encoding"):
        Tokenizer.from_tiktoken(42)


# --- to_tiktoken / save_tiktoken ---------------------------------------------------

@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "gpt4o"])
def test_to_tiktoken_encodes_the_same(pattern, tmp_path):
    tok = trained(pattern)
    enc = tok.to_tiktoken()
    for path in CORPUS_FILES:
        text = path.read_text()
        assert tok.encode(text, disallowed_special=()) == enc.encode(text, disallowed_special=())
        assert tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    # The .tiktoken file round trip, read by tiktoken's own loader too.
    tok.save_tiktoken(tmp_path / "ours.tiktoken")
    from tiktoken.load import load_tiktoken_bpe
    assert load_tiktoken_bpe(str(tmp_path / "ours.tiktoken")) == enc._mergeable_ranks
    back = Tokenizer.from_tiktoken(tmp_path / "ours.tiktoken", pattern=pattern, special_tokens=tok.special_tokens)
    assert back == tok


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "gpt4o"])
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=st.text(max_size=60))
def test_to_tiktoken_hypothesis(pattern, text):
    tok = trained(pattern)
    assert tok.encode(text, allowed_special="all") == tok.to_tiktoken().encode(text, allowed_special="all")


# --- HuggingFace --------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def hf_of(key):
    tok = trained(key) if key in ("gpt2", "gpt4", "gpt4o") else openai(key)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"bpe-test-{os.getpid()}-{key}.json"
    tok.save_huggingface(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    back = Tokenizer.from_huggingface(path)
    path.unlink()
    return tok, hf, back


KEYS = ["gpt2", "gpt4", "gpt4o"] + ENCODINGS


@pytest.mark.parametrize("key", KEYS)
def test_huggingface_round_trip(key):
    tok, hf, back = hf_of(key)
    assert back == tok
    assert hf.get_vocab_size() == len(tok.vocab) + len(tok.special_tokens)  # ids may have holes (cl100k)
    for path in CORPUS_FILES:
        text = path.read_text()
        ids = tok.encode(text, allowed_special="all")
        assert hf.encode(text).ids == ids, path.name
        assert hf.decode(ids, skip_special_tokens=False) == text


@pytest.mark.parametrize("key", KEYS)
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(codec="utf-8", categories=["L", "M", "N", "P", "S", "Z", "Cc"]), max_size=40))
def test_huggingface_hypothesis(key, text):
    tok, hf, _ = hf_of(key)
    assert hf.encode(text).ids == tok.encode(text, allowed_special="all")


@pytest.mark.parametrize("key", KEYS)
def test_huggingface_special_tokens_keep_their_ids(key):
    """cl100k's <|endoftext|> (100257) follows a hole (100256): `tokenizers`
    renumbers an added token the model does not list, so the model lists it."""
    tok, hf, _ = hf_of(key)
    text = "".join(f"{s} x" for s in tok.special_tokens)
    assert hf.encode(text).ids == tok.encode(text, allowed_special="all")


def test_gpt2_style_tokenizer_json(tmp_path):
    # GPT-2's own tokenizer.json uses ByteLevel(use_regex=True) and "a b" merges;
    # build one with `tokenizers` itself from r50k's ranks.
    r50k = openai("r50k_base")
    from bpe.formats.huggingface import token_to_str
    vocab = {token_to_str(b): i for i, b in r50k.vocab.items()}
    merges = [(token_to_str(r50k.vocab[l]), token_to_str(r50k.vocab[r])) for (l, r) in r50k.merges]
    hf = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = tokenizers.decoders.ByteLevel()
    hf.add_special_tokens(["<|endoftext|>"])
    hf.save(str(tmp_path / "gpt2.json"))
    tok = Tokenizer.from_huggingface(tmp_path / "gpt2.json")
    assert tok.pattern == bpe.GPT2_PATTERN
    assert tok == r50k
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:100_000]
    assert tok.encode(text) == hf.encode(text).ids


def test_huggingface_refusals(tmp_path):
    tok, _, _ = hf_of("gpt2")
    tok.save_huggingface(tmp_path / "ok.json")
    doc = json.loads((tmp_path / "ok.json").read_text())

    def refused(change, match):
        d = json.loads(json.dumps(doc))
        change(d)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(d))
        with pytest.raises(ValueError, match=match):
            Tokenizer.from_huggingface(p)

    refused(lambda d: d["model"].update(type="WordPiece"), "only BPE")
    refused(lambda d: d.update(normalizer={"type": "NFC"}), "normalizers are not supported")
    refused(lambda d: d["model"]["vocab"].update({"\u4e00": 99999}), "not one of the 256 byte-level")
    refused(lambda d: d["model"]["merges"].reverse(), "do not grow with the merge order")
    refused(lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "'Whitespace' is not supported")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a HuggingFace tokenizer.json"):
        Tokenizer.from_huggingface(tmp_path / "junk.json")


# --- our own file format and pickling with rank vocabularies ------------------------

@pytest.mark.parametrize("name", ENCODINGS)
def test_save_load_and_pickle_rank_vocabularies(name, tmp_path):
    tok = openai(name)
    tok.save(tmp_path / "t.bpe")
    assert Tokenizer.load(tmp_path / "t.bpe") == tok
    assert pickle.loads(pickle.dumps(tok)) == tok
    text = (CORPORA / "emoji-test.txt").read_text()[:50_000]
    assert pickle.loads(pickle.dumps(tok)).encode_ordinary(text) == tok.encode_ordinary(text)


def test_readme_parity_example():
    require_vocab("cl100k_base")
    tok = Tokenizer.from_tiktoken("cl100k_base")
    enc = tiktoken.get_encoding("cl100k_base")
    text = "The quick brown 🦊 jumps over 1234 lazy dogs!"
    assert tok.encode(text) == enc.encode(text)
