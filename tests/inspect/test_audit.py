"""`bpe audit` (bpe/inspect/audit.py): each category on a hand-built vocabulary, and
the claim behind "unreachable" checked on arbitrary text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from helpers import assert_clean_failure, ok, run

import bpe
from bpe import Tokenizer
from bpe.inspect.audit import audit, format_report, inside_counts, merge_result, unreachable

pytest.importorskip("numpy", reason="bpe audit needs numpy (the model extra)")

A, B, C, D = 97, 98, 99, 100


def _abcd() -> Tokenizer:
    # "bc" (256) is learned first, then "ab" (257), "cd" (258) and "abcd" = "ab" + "cd"
    # (259). Merging b"abcd" alone: pairs ab (257), bc (256), cd (258): bc first, giving
    # a|bc|d; then "abc" and "bcd" are no tokens: it ends as [a, bc, d]. So "abcd" is
    # unreachable by merging. (Any 3-byte token is reachable: its two last parts always
    # join, since tiktoken merges any adjacent pair whose bytes are a token.)
    return Tokenizer([(B, C), (A, B), (C, D), (257, 258)], "gpt2", {})


def test_unreachable_by_hand():
    tok = _abcd()
    ranks = {b: i for i, b in tok.vocab.items()}
    assert merge_result(b"abcd", ranks) == [b"a", b"bc", b"d"]
    assert merge_result(b"cd", ranks) == [b"cd"]
    assert unreachable(tok) == [259]
    # tiktoken's shortcut: a chunk that is exactly a token's bytes becomes that token.
    assert tok.encode("abcd") == [259]
    assert tok.encode("xabcd") == [ord("x"), A, 256, D]


@given(st.text(alphabet="abcdx \n", max_size=40))
def test_an_unreachable_token_appears_only_as_a_whole_chunk(text):
    tok = _abcd()
    for chunk in bpe.pretokenize(text, tok.pattern):
        ids = tok.encode_ordinary(chunk)
        assert (259 in ids) == (chunk == "abcd"), chunk
    assert tok.encode_ordinary(text) == [i for c in bpe.pretokenize(text, tok.pattern) for i in tok.encode_ordinary(c)]


def _ab_abc() -> Tokenizer:
    return Tokenizer([(A, B), (256, C)], "gpt2", {})  # "ab" = 256, "abc" = 257


def test_inside_by_hand():
    tok = _ab_abc()
    np = pytest.importorskip("numpy")
    counts = np.zeros(tok.n_vocab, dtype=np.int64)
    counts[257], counts[256], counts[A] = 200, 1, 5
    inside = inside_counts(tok, counts)
    # abc: 200 alone. ab: 1 alone + 200 inside abc. a: 5 alone + 201 inside ab. c: 200 inside abc.
    assert (inside[257], inside[256], inside[A], inside[C]) == (200, 201, 206, 200)
    # A token built from the same part twice counts it twice: "aa" = a + a.
    tok2 = Tokenizer([(A, A)], "gpt2", {})
    counts2 = np.zeros(tok2.n_vocab, dtype=np.int64)
    counts2[256] = 3
    assert inside_counts(tok2, counts2)[A] == 6


def test_audit_with_corpus(tmp_path):
    tok = _ab_abc()
    corpus = tmp_path / "c.txt"
    # " abc" x 200 -> [32, 257] each; then " ab" -> [32, 256]: "ab" alone once, inside "abc" 200 times.
    corpus.write_text(" abc" * 200 + " ab", encoding="utf-8")
    report = audit(tok, [corpus])
    cats = report["categories"]
    assert report["corpus_tokens"] == 402 and report["vocab_size"] == 258
    assert [i["id"] for i in cats["consumed"]["items"]] == [256]
    assert cats["consumed"]["items"][0]["inside"] == 201 and cats["consumed"]["items"][0]["count"] == 1
    # Rare with min_count 0: every token not produced: all bytes but " ", and none of the merges.
    rare = [i["id"] for i in cats["rare"]["items"]]
    assert set(rare) == set(range(256)) - {32}
    # min_count 1 adds "ab" (count 1) after the never-seen ones.
    rare1 = [i["id"] for i in audit(tok, [corpus], min_count=1)["categories"]["rare"]["items"]]
    assert rare1[-1] == 256 and len(rare1) == 256
    # Without a corpus: no rare or consumed category.
    assert set(audit(tok)["categories"]) == {"unreachable", "not_utf8", "near_duplicates"}


def test_not_utf8_and_near_duplicates():
    tok = Tokenizer([(32, A), (0xC3, 0xA9)], "gpt2", {})  # " a" = 256, "é" = 257
    cats = audit(tok)["categories"]
    # The byte tokens 0x80..0xFF are not UTF-8 alone; "é" is.
    assert [i["id"] for i in cats["not_utf8"]["items"]] == list(range(0x80, 0x100))
    groups = [[t["id"] for t in g["tokens"]] for g in cats["near_duplicates"]["items"]]
    # "a", "A", " a" -> key "a" (3 tokens), first; then the 25 other letter pairs x/X.
    assert groups[0] == [65, 97, 256]
    assert len(groups) == 26 and all(len(g) == 2 for g in groups[1:])
    text = format_report(audit(tok), top=2)
    assert "near_duplicates: 26" in text and "... 24 more" in text


def test_cli(tmp_path):
    path = tmp_path / "t.bpe"
    _abcd().save(path)
    corpus = tmp_path / "c.txt"
    corpus.write_text("abcd xabcd\n", encoding="utf-8")
    out = ok(run("audit", "-t", path, "--corpus", corpus, cwd=tmp_path)).stdout
    assert "unreachable: 1" in out and "'abcd'" in out
    report = json.loads(ok(run("audit", "-t", path, "--corpus", corpus, "--json", "--top", "3", cwd=tmp_path)).stdout)
    assert report["categories"]["unreachable"]["items"][0]["id"] == 259
    assert report["categories"]["unreachable"]["items"][0]["count"] == 1  # the whole chunk "abcd"
    assert len(report["categories"]["rare"]["items"]) == 3 and report["categories"]["rare"]["total"] > 3
    line = assert_clean_failure(run("audit", "-t", path, "--corpus", tmp_path / "none.txt", cwd=tmp_path))
    assert "none.txt" in line
    assert_clean_failure(run("audit", "-t", path, "--top", "-1", cwd=tmp_path), usage=True)
