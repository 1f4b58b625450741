"""Extending a vocabulary (``Tokenizer.train(..., base=tok)``, ``bpe train
--base``) and adding special tokens (``with_special_tokens``).

The invariant: every id of the base keeps its bytes, and a chunk whose base
encoding no new merge applies to gets exactly the base's ids. A new merge
applies to a chunk when two neighbouring ids of its base encoding join into
a new token; that is checked chunk by chunk, on arbitrary text, so the
equality is tested wherever it must hold, and the difference where it must not.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from hypothesis import given, strategies as st

from bpe import Tokenizer, pretokenize
from conftest import CORPORA, require_vocab

SHAKESPEARE = (CORPORA / "tinyshakespeare.txt").read_text()[:200_000]
CODE = (CORPORA / "cpython_stdlib_sample.py.txt").read_text()[:200_000]
UDHR = (CORPORA / "multilingual_udhr.txt").read_text()


@pytest.fixture(scope="module")
def base():
    return Tokenizer.train(SHAKESPEARE, 1000)


@pytest.fixture(scope="module")
def extended(base):
    return Tokenizer.train(CODE, 1500, base=base)


@pytest.fixture(scope="module")
def cl100k():
    require_vocab("cl100k_base")
    return Tokenizer.from_tiktoken("cl100k_base")


@pytest.fixture(scope="module")
def cl100k_extended(cl100k):
    return Tokenizer.train(CODE[:100_000], len(cl100k.vocab) + len(cl100k.special_tokens) + 300, base=cl100k)


def check_chunks(base, ext, text):
    """Chunk by chunk: the base's ids where no new merge applies, fewer ids
    where one does."""
    new_ids = set(ext.vocab) - set(base.vocab)
    ids_of = {b: i for i, b in ext.vocab.items()}
    for chunk in pretokenize(text, base.pattern):
        ids = base.encode_ordinary(chunk)
        joins = any(ids_of.get(base.vocab[a] + base.vocab[b]) in new_ids for a, b in zip(ids, ids[1:]))
        got = ext.encode_ordinary(chunk)
        if joins:
            assert len(got) < len(ids), chunk
        else:
            assert got == ids, chunk


def test_keeps_every_base_id_and_merge(base, extended):
    assert all(extended.vocab[i] == b for i, b in base.vocab.items())
    assert list(extended.merges)[: len(base.merges)] == list(base.merges)
    assert len(extended.vocab) + len(extended.special_tokens) == 1500
    # The special token lost its id to a new token: it comes after them.
    assert extended.special_tokens == {"<|endoftext|>": 1499}


@given(st.text(max_size=200))
def test_untouched_chunks_keep_the_base_ids(base, extended, text):
    check_chunks(base, extended, text)


def test_text_of_other_domains(base, extended):
    for text in (SHAKESPEARE[-20_000:], UDHR[:30_000], CODE[-20_000:]):
        check_chunks(base, extended, text)
    # Code is the new merges' domain: they shorten it.
    assert extended.decode(extended.encode(CODE[-5000:])) == CODE[-5000:]
    assert len(extended.encode(CODE[-20_000:])) < len(base.encode(CODE[-20_000:]))


def test_extending_cl100k_keeps_tiktokens_ranks(cl100k, cl100k_extended):
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base")
    ext = cl100k_extended
    assert not ext._from_merges  # a rank vocabulary stays one
    assert ext.vocab.keys() >= cl100k.vocab.keys()
    assert all(ext.vocab[r] == b for b, r in enc._mergeable_ranks.items())
    assert len(ext.vocab) == len(cl100k.vocab) + 300
    # cl100k's special tokens sit at 100257.. where new tokens went: all move
    # after the new tokens, in their old order.
    end = max(ext.vocab) + 1
    assert ext.special_tokens == {s: end + k for k, s in enumerate(sorted(cl100k.special_tokens,
                                                                           key=cl100k.special_tokens.get))}
    check_chunks(cl100k, ext, UDHR[:20_000])
    german = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
    if not any(ext.encode_ordinary(c) != cl100k.encode_ordinary(c) for c in pretokenize(german, ext.pattern)):
        assert ext.encode(german) == enc.encode(german)


@given(st.text(max_size=100))
def test_cl100k_untouched_chunks(cl100k, cl100k_extended, text):
    check_chunks(cl100k, cl100k_extended, text)


def test_base_by_name_and_file(tmp_path, base):
    path = tmp_path / "base.bpe"
    base.save(path)
    by_file = Tokenizer.train(CODE[:50_000], 1100, base=str(path))
    assert by_file == Tokenizer.train(CODE[:50_000], 1100, base=base)


def test_special_tokens_keep_their_ids_where_free():
    tok = Tokenizer.train(SHAKESPEARE[:50_000], 400, special_tokens=())
    tok = tok.with_special_tokens({"<|a|>": 5000, "<|b|>": 400})
    ext = Tokenizer.train(CODE[:50_000], 402 + 1 + 50, base=tok, special_tokens=["<|c|>"])
    assert ext.special_tokens["<|a|>"] == 5000  # untouched
    assert ext.special_tokens["<|b|>"] == 450 and ext.special_tokens["<|c|>"] == 451  # moved, then added


def test_errors(base):
    with pytest.raises(ValueError, match="not above the base's 1000 tokens"):
        Tokenizer.train(CODE, 1000, base=base)
    with pytest.raises(ValueError, match="extending with a base whose pattern differs"):
        Tokenizer.train(CODE, 1100, base=base, pattern="gpt2")
    Tokenizer.train(CODE[:1000], 1001, base=base, pattern="gpt4")  # the same pattern, spelled out: fine
    with pytest.raises(TypeError, match="base must be a Tokenizer"):
        Tokenizer.train(CODE, 1100, base=42)
    with pytest.raises(Exception, match="no such file"):
        Tokenizer.train(CODE, 1100, base="no-such-tokenizer.bpe")
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        Tokenizer.train(CODE, 1100.0, base=base)


def test_corpus_running_out_warns(base):
    with pytest.warns(UserWarning, match="ran out of pairs"):
        ext = Tokenizer.train("ab ab", 1100, base=base)
    assert ext.decode(ext.encode("ab ab")) == "ab ab"


def test_save_and_load(tmp_path, extended, cl100k_extended):
    for tok in (extended, cl100k_extended):
        tok.save(tmp_path / "t.bpe")
        assert Tokenizer.load(tmp_path / "t.bpe") == tok


def test_cli_base(tmp_path, base):
    base.save(tmp_path / "base.bpe")
    corpus = tmp_path / "code.txt"
    corpus.write_text(CODE[:50_000])
    run = [sys.executable, "-m", "bpe", "train", str(corpus), "--base", str(tmp_path / "base.bpe"), "-q"]
    subprocess.run([*run, "--vocab", "1100", "-o", str(tmp_path / "ext.bpe")], check=True)
    assert Tokenizer.load(tmp_path / "ext.bpe") == Tokenizer.train(CODE[:50_000], 1100, base=base)
    bad = subprocess.run([*run, "--vocab", "1100", "--special", "<x>", "-o", str(tmp_path / "x.bpe")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--base keeps the base's special tokens" in bad.stderr


# -- with_special_tokens ------------------------------------------------------


def test_with_special_tokens(base):
    tok = base.with_special_tokens(["<|fim_prefix|>", "<|fim_suffix|>"])
    assert tok.special_tokens == {"<|endoftext|>": 999, "<|fim_prefix|>": 1000, "<|fim_suffix|>": 1001}
    assert base.special_tokens == {"<|endoftext|>": 999}  # a new tokenizer; this one is unchanged
    assert tok.encode("a<|fim_prefix|>b", allowed_special="all") == [97, 1000, 98]
    tok = base.with_special_tokens({"<|pad|>": 2000})
    assert tok.n_vocab == 2001 and tok.decode([2000]) == "<|pad|>"


@given(st.text(max_size=50))
def test_with_special_tokens_changes_no_ordinary_id(base, text):
    tok = base.with_special_tokens(["<|x|>"])
    assert tok.encode_ordinary(text) == base.encode_ordinary(text)


def test_with_special_tokens_errors(base):
    with pytest.raises(ValueError, match="ordinary token"):
        base.with_special_tokens({"<|x|>": 300})
    with pytest.raises(ValueError, match="which the special token '<|endoftext|>' has"):
        base.with_special_tokens({"<|x|>": 999})
    with pytest.raises(ValueError, match="is a special token already"):
        base.with_special_tokens(["<|endoftext|>"])
    with pytest.raises(ValueError, match="duplicate special tokens"):
        base.with_special_tokens(["<|x|>", "<|x|>"])
    with pytest.raises(ValueError, match="non-empty str"):
        base.with_special_tokens([""])
    with pytest.raises(TypeError, match=r"for one token write \['<\|x\|>'\]"):
        base.with_special_tokens("<|x|>")
    with pytest.raises(TypeError, match="dict"):
        base.with_special_tokens(5)
    with pytest.raises(ValueError, match="taken or invalid"):
        base.with_special_tokens({"<|x|>": -1})


def test_no_warning_on_plain_extension(base):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tokenizer.train(CODE[:50_000], 1010, base=base)


@pytest.mark.parametrize("name", ["tinyshakespeare.txt", "multilingual_udhr.txt", "cpython_stdlib_sample.py.txt",
                                  "emoji-test.txt"])
def test_extending_on_the_same_corpus_is_training_on(name):
    # A differential check of the extending merge loop against the trainer
    # from bytes: on the corpus a base was trained on, its encoding of each
    # chunk is where training stood after its merges, so learning on from
    # there must give the merges training further gives.
    text = (CORPORA / name).read_text()[:300_000]
    assert Tokenizer.train(text, 1500, base=Tokenizer.train(text, 700))._dumps() == Tokenizer.train(text, 1500)._dumps()


def test_extending_o200k_keeps_a_special_id_no_new_token_needs():
    # o200k: ranks 0..199997, <|endoftext|> 199999, <|endofprompt|> 200018.
    # Ten new tokens take 199998..200007: <|endoftext|> loses its id and
    # moves after them; <|endofprompt|> keeps its own.
    require_vocab("o200k_base")
    o200k = Tokenizer.from_tiktoken("o200k_base")
    ext = Tokenizer.train(CODE[:50_000], len(o200k.vocab) + len(o200k.special_tokens) + 10, base="o200k")
    assert sorted(set(ext.vocab) - set(o200k.vocab)) == list(range(199_998, 200_008))
    assert ext.special_tokens == {"<|endoftext|>": 200_008, "<|endofprompt|>": 200_018}
    check_chunks(o200k, ext, UDHR[:10_000])
