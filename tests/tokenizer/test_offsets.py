"""Token budgets and offsets: ``count`` and ``encode_with_offsets``.

``count(text)`` is ``len(encode(text))`` under every special-token rule, and
raises what ``encode`` raises. Offsets: the ids are ``encode``'s; offsets
never decrease; in bytes, the tokens from ``i`` on decode to the text's
bytes from ``offsets[i]`` on; in characters, where a token starts on a
character's first byte, the text from ``offsets[i]`` on is what the tokens
from ``i`` on decode to, and a token starting inside a character gets that
character's index.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from bpe import Tokenizer
from conftest import CORPORA, require_vocab

CORPUS = (CORPORA / "multilingual_udhr.txt").read_text()[:100_000] + (CORPORA / "emoji-test.txt").read_text()[:20_000]
SPECIALS = ["<|endoftext|>", "<|pad|>", "<|pad|>x"]
specials_text = st.lists(st.one_of(st.text(max_size=20), st.sampled_from(SPECIALS)), max_size=6).map("".join)
policies = st.sampled_from([
    {}, {"allowed_special": "all"}, {"disallowed_special": ()}, {"allowed_special": {"<|pad|>"}},
    {"allowed_special": {"<|pad|>"}, "disallowed_special": ()}, {"allowed_special": "all", "disallowed_special": ()},
])


@pytest.fixture(scope="module", params=["trained", "cl100k", "o200k"])
def tok(request):
    if request.param != "trained":
        require_vocab(f"{request.param}_base")
        return Tokenizer.from_tiktoken(f"{request.param}_base").with_special_tokens(["<|pad|>", "<|pad|>x"])
    return Tokenizer.train(CORPUS, 1200, special_tokens=SPECIALS)


def outcome(f):
    try:
        return f()
    except ValueError as e:
        return type(e), str(e)


@given(specials_text, policies)
def test_count_is_len_encode(tok, text, policy):
    assert outcome(lambda: tok.count(text, **policy)) == outcome(lambda: len(tok.encode(text, **policy)))


def test_count_on_real_text(tok):
    for text in (CORPUS, CORPUS[:1000] * 50, "a" * 100_000):
        assert tok.count(text) == len(tok.encode(text))


@given(specials_text, policies, st.booleans())
def test_offsets(tok, text, policy, numpy):
    got = outcome(lambda: tok.encode_with_offsets(text, unit="bytes", **policy))
    if type(got) is tuple and got and got[0] is ValueError:
        assert got == outcome(lambda: tok.encode(text, **policy))
        return
    ids, offsets = got
    assert ids == tok.encode(text, **policy)
    assert offsets == sorted(offsets) and len(offsets) == len(ids)
    data = text.encode()
    for i in range(len(ids)):
        assert tok.decode_bytes(ids[i:]) == data[offsets[i]:]
    ids_c, chars = tok.encode_with_offsets(text, **policy)
    assert ids_c == ids and chars == sorted(chars)
    for i, b in enumerate(offsets):
        # The character a token starts in: the one whose UTF-8 holds byte b
        # (the whole characters before b are its index).
        assert chars[i] == len(data[:b].decode("utf-8", "ignore"))
        if (data[b] & 0xC0) != 0x80:  # on a character's first byte
            assert text[chars[i]:] == tok.decode(ids[i:])


def test_a_piece_of_a_character_gets_its_index():
    # A vocabulary with no token for 🙂: it is cut into its bytes.
    tok = Tokenizer.train("ab ab ab", 258)
    ids, chars = tok.encode_with_offsets("x🙂y")
    _, bytes_ = tok.encode_with_offsets("x🙂y", unit="bytes")
    assert len(ids) == 6 and bytes_ == [0, 1, 2, 3, 4, 5]
    assert chars == [0, 1, 1, 1, 1, 2]


def test_numpy(tok):
    np = pytest.importorskip("numpy")
    text = CORPUS[:3000]
    ids, offsets = tok.encode_with_offsets(text, numpy=True, unit="bytes")
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    plain_ids, plain_offsets = tok.encode_with_offsets(text, unit="bytes")
    assert ids.tolist() == plain_ids and offsets.tolist() == plain_offsets


def test_surrogates_count_as_one_character(tok):
    ids, chars = tok.encode_with_offsets("a\ud800b")
    assert tok.decode(ids) == "a\ufffdb" and chars[-1] == 2 and tok.count("a\ud800b") == len(ids)


def test_errors(tok):
    with pytest.raises(ValueError, match="unit must be 'chars' or 'bytes'"):
        tok.encode_with_offsets("x", unit="tokens")
    with pytest.raises(TypeError, match="numpy must be True or False"):
        tok.encode_with_offsets("x", numpy="yes")
    for call in (tok.count, tok.encode_with_offsets):
        with pytest.raises(TypeError, match="text must be a str, not bytes"):
            call(b"x")
        with pytest.raises(ValueError, match="disallowed"):
            call("<|pad|>")
        with pytest.raises(TypeError, match="allowed_special must be 'all' or a collection"):
            call("x", allowed_special="<|pad|>")
    assert tok.count("") == 0 and tok.encode_with_offsets("") == ([], [])
