"""Token budgets (bpe/_tokenizer/budgets.py): truncate and chunk.

The oracle for ``truncate`` is the definition itself, checked on every
prefix: the longest prefix (at a character boundary) that encodes to at most
``max_tokens`` tokens. ``chunk``'s invariants: the pieces join back to the
text (overlap 0), each encodes to at most ``max_tokens`` tokens and decodes
back to itself, and each is as long as ``truncate`` allows."""

import functools

import pytest
from hypothesis import given, strategies as st

from bpe import Tokenizer
from bpe._tokenizer.budgets import chunk_spans
from conftest import CORPORA, CORPUS_FILES, require_vocab

SPECIALS = ["<|endoftext|>", "<|pad|>"]


@functools.lru_cache(maxsize=None)
def trained():
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:200_000] + (CORPORA / "multilingual_udhr.txt").read_text()
    return Tokenizer.train(text, 2000, special_tokens=SPECIALS, progress=False)


@functools.lru_cache(maxsize=None)
def openai(name):
    require_vocab(name)
    return Tokenizer.from_tiktoken(name)


def tokenizer(key):
    return trained() if key == "trained" else openai(key)


def n_tokens(tok, text, **kw):
    return len(tok.encode(text, **kw))


def longest_prefix(tok, text, n, **kw):
    """The definition, by brute force."""
    return max(k for k in range(len(text) + 1) if n_tokens(tok, text[:k], **kw) <= n)


# Text that makes BPE prefix-unstable: words cut mid-way, runs of spaces and
# newlines before words, digits, emoji (4 bytes), CJK, combining marks.
PIECES = ["hello", " hello", " world", "   ", "\n", "\n\n", " ", "1234", "'s", "🦊", "中文", "é", "e\u0301",
          "!!", " <|endoftext|>", "ROMEO:", "  x", "\t"]
texty = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(PIECES), max_size=12).map("".join),
)


# -- truncate -----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["trained", "cl100k_base"])
@given(text=texty, n=st.integers(1, 12))
def test_truncate_is_the_longest_prefix_that_fits(key, text, n):
    tok = tokenizer(key)
    kw = {"disallowed_special": ()}
    out = tok.truncate(text, n, **kw)
    assert text.startswith(out)
    assert n_tokens(tok, out, **kw) <= n
    assert len(out) == longest_prefix(tok, text, n, **kw)


@pytest.mark.parametrize("key", ["trained", "cl100k_base"])
@given(text=texty, n=st.integers(1, 12))
def test_truncate_with_special_tokens(key, text, n):
    tok = tokenizer(key)
    kw = {"allowed_special": "all"}
    out = tok.truncate(text, n, **kw)
    assert text.startswith(out) and n_tokens(tok, out, **kw) <= n
    assert len(out) == longest_prefix(tok, text, n, **kw)


@pytest.mark.parametrize("key", ["trained", "cl100k_base", "o200k_base"])
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_truncate_corpora(key, path):
    tok = tokenizer(key)
    text = path.read_text()[:20_000]
    for n in (1, 7, 100, 1000):
        out = tok.truncate(text, n, disallowed_special=())
        assert text.startswith(out) and n_tokens(tok, out, disallowed_special=()) <= n
        # Maximal: the next character does not fit (the brute force is too slow here).
        assert len(out) == len(text) or n_tokens(tok, text[: len(out) + 1], disallowed_special=()) > n


LONG = ["a" * 700, " " * 300, "1" * 301, "🦊" * 200, "中" * 500, "x y " * 150, "\n" * 200, "aé" * 300]


@pytest.mark.parametrize("key", ["trained", "cl100k_base"])
@given(parts=st.lists(st.sampled_from(PIECES + LONG), min_size=1, max_size=6), n=st.integers(1, 300))
def test_truncate_long_runs(key, parts, n):
    """Texts with long chunks (runs of letters, spaces, digits, emoji, CJK),
    where the window of the text that is encoded matters: the prefix fits
    and the next character does not."""
    tok = tokenizer(key)
    text = "".join(parts)
    kw = {"disallowed_special": ()}
    out = tok.truncate(text, n, **kw)
    assert text.startswith(out) and n_tokens(tok, out, **kw) <= n
    assert len(out) == len(text) or n_tokens(tok, text[: len(out) + 1], **kw) > n


def test_truncate_fits_whole_text():
    tok = trained()
    assert tok.truncate("To be", 100) == "To be"
    assert tok.truncate("", 1) == ""


def test_truncate_never_splits_a_character():
    tok = trained()
    # An emoji of 4 byte tokens: with 2 tokens to spare it does not fit at all.
    assert tok.truncate("ab🦊", n_tokens(tok, "ab") + 2) == "ab"


def test_truncate_special_token_rules():
    tok = trained()
    with pytest.raises(ValueError, match="which is disallowed"):
        tok.truncate("hi <|endoftext|>", 2)
    assert tok.truncate("hi<|endoftext|>there", n_tokens(tok, "hi") + 1, allowed_special="all") == "hi<|endoftext|>"


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("3", TypeError),
                                        (True, TypeError), (None, TypeError)])
def test_truncate_bad_max_tokens(bad, error):
    with pytest.raises(error, match="max_tokens"):
        trained().truncate("some text", bad)


@given(text=st.text(st.characters(categories=["Cs", "Ll", "Zs", "So"]), max_size=30), n=st.integers(1, 8))
def test_lone_surrogates(text, n):
    """A str with lone surrogates (no UTF-8 form): encoded with U+FFFD in
    their place, as encode() does; the answers still fit and join up."""
    tok = trained()
    out = tok.truncate(text, n)
    assert text.startswith(out) and n_tokens(tok, out) <= n
    pieces = tok.chunk(text, max(n, 4))
    assert "".join(pieces) == text and all(n_tokens(tok, p) <= max(n, 4) for p in pieces)


def test_truncate_bad_text():
    with pytest.raises(TypeError, match="text must be a str"):
        trained().truncate(b"bytes", 3)


# -- chunk --------------------------------------------------------------------------


def check_pieces(tok, text, pieces, n, kw):
    assert "".join(pieces) == text
    for p in pieces:
        ids = tok.encode(p, **kw)
        assert 1 <= len(ids) <= n
        assert tok.decode(ids) == p
    # Each piece but the last is as long as truncate makes it.
    rest = text
    for p in pieces[:-1]:
        assert p == tok.truncate(rest, n, **kw)
        rest = rest[len(p):]


@pytest.mark.parametrize("key", ["trained", "cl100k_base"])
@given(text=texty, n=st.integers(4, 12))
def test_chunk_invariants(key, text, n):
    tok = tokenizer(key)
    kw = {"disallowed_special": ()}
    check_pieces(tok, text, tok.chunk(text, n, **kw), n, kw)


@pytest.mark.parametrize("key", ["trained", "cl100k_base"])
@given(text=texty, n=st.integers(4, 12), data=st.data())
def test_chunk_overlap(key, text, n, data):
    tok = tokenizer(key)
    overlap = data.draw(st.integers(0, n - 1))
    kw = {"disallowed_special": ()}
    spans = chunk_spans(tok, text, n, overlap, frozenset(), ())
    assert [text[a:b] for a, b in spans] == tok.chunk(text, n, overlap, **kw)
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (a, b), (c, d) in zip(spans, spans[1:]):
        assert a < c <= b < d  # moves on; consecutive pieces meet or overlap
        if overlap == 0:
            assert c == b
        else:
            # The shared text is at most the bytes of the piece's last `overlap` tokens.
            piece = tok.encode(text[a:b], **kw)
            assert len(text[c:b].encode()) <= len(tok.decode_bytes(piece[-overlap:]))
    for a, b in spans:
        assert 1 <= n_tokens(tok, text[a:b], **kw) <= n


@pytest.mark.parametrize("key", ["trained", "cl100k_base", "o200k_base"])
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_chunk_corpora(key, path):
    tok = tokenizer(key)
    text = path.read_text()[:30_000]
    kw = {"disallowed_special": ()}
    for n in (16, 300):
        pieces = tok.chunk(text, n, **kw)
        assert "".join(pieces) == text
        assert all(len(tok.encode(p, **kw)) <= n and tok.decode(tok.encode(p, **kw)) == p for p in pieces)
        over = tok.chunk(text, n, overlap=n // 4, **kw)
        assert over[0] == pieces[0] and len(over) >= len(pieces)


def test_chunk_errors():
    tok = trained()
    with pytest.raises(ValueError, match="overlap"):
        tok.chunk("text", 4, overlap=4)
    with pytest.raises(ValueError, match="overlap"):
        tok.chunk("text", 4, overlap=-1)
    with pytest.raises(TypeError, match="overlap"):
        tok.chunk("text", 4, overlap=1.0)
    with pytest.raises(ValueError, match="max_tokens"):
        tok.chunk("text", 0)
    with pytest.raises(TypeError, match="max_tokens"):
        tok.chunk("text", "4")
    with pytest.raises(TypeError, match="text must be a str"):
        tok.chunk(None, 4)
    # A character that alone needs more tokens than allowed cannot be cut.
    with pytest.raises(ValueError, match="too small"):
        tok.chunk("ab🦊", 3)
    with pytest.raises(ValueError, match="which is disallowed"):
        tok.chunk("a <|endoftext|>", 3)
    assert tok.chunk("", 3) == []
