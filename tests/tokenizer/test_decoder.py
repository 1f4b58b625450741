"""Streaming decode (bpe/decoder.py): text out as ids come in.

The invariant: however the ids are cut into ``feed`` calls, the pieces and
``flush()`` join to ``decode(ids, errors=...)``, and no piece holds a U+FFFD
that decoding the whole sequence would not (a character split across tokens
waits for its last byte)."""

import functools

import pytest
from hypothesis import given, strategies as st

from bpe import Tokenizer
from conftest import CORPORA, CORPUS_FILES, SHARED, require_vocab


@functools.lru_cache(maxsize=None)
def trained():
    text = (CORPORA / "tinyshakespeare.txt").read_text()[:200_000] + (CORPORA / "multilingual_udhr.txt").read_text()
    return Tokenizer.train(text, 2000, special_tokens=["<|endoftext|>", "<|pad|>"], progress=False)


@functools.lru_cache(maxsize=None)
def openai(name):
    require_vocab(name)
    return Tokenizer.from_tiktoken(name)


def streamed(tok, ids, errors="replace", step=1):
    dec = tok.decoder(errors=errors)
    pieces = [dec.feed(ids[i] if step == 1 else ids[i : i + step]) for i in range(0, len(ids), step)]
    return pieces, dec.flush()


TOKENIZERS = ["trained", "cl100k_base", "o200k_base"]


def tokenizer(key):
    return trained() if key == "trained" else openai(key)


@pytest.mark.parametrize("key", TOKENIZERS)
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_one_id_at_a_time_is_decode(key, path):
    tok = tokenizer(key)
    text = path.read_text()
    ids = tok.encode(text, allowed_special="all")
    pieces, rest = streamed(tok, ids)
    assert "".join(pieces) + rest == text == tok.decode(ids)
    assert rest == ""
    # Only whole characters come out: no piece holds a U+FFFD the text has not.
    assert all("\ufffd" not in p for p in pieces) or "\ufffd" in text


@pytest.mark.parametrize("key", TOKENIZERS)
@pytest.mark.parametrize("name", ["small/emoji-test.txt", "small/multilingual_udhr.txt", "small/input.txt",
                                  "mid/flores200_devtest_184langs.txt.xz"])
def test_shared_corpora(key, name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} not found: the large corpora are only in the project's shared/ folder")
    if path.suffix == ".xz":
        import lzma

        text = lzma.open(path, "rt", encoding="utf-8").read(300_000)
    else:
        text = path.read_text(encoding="utf-8")
    tok = tokenizer(key)
    ids = tok.encode(text, allowed_special="all")
    pieces, rest = streamed(tok, ids)
    assert "".join(pieces) + rest == tok.decode(ids) == text


def test_a_split_character_waits_for_its_last_byte():
    tok = trained()
    dec = tok.decoder()
    # "中" is three bytes, each a byte token here (ids 0..255 are the bytes).
    b = "中".encode()
    assert dec.feed(b[0]) == "" and dec.pending() == b[:1]
    assert dec.feed([b[1]]) == "" and dec.pending() == b[:2]
    assert dec.feed(b[2]) == "中" and dec.pending() == b""
    # A dangling tail: U+FFFD under "replace", an error under "strict".
    dec.feed(b[0])
    assert dec.flush() == "\ufffd"
    assert dec.flush() == ""  # flushed: empty again
    strict = tok.decoder(errors="strict")
    strict.feed([b[0], b[1]])
    with pytest.raises(ValueError, match="unexpected end of data"):
        strict.flush()
    assert strict.feed(list(b)) == "中"  # usable again after the error


def test_feed_takes_any_iterable_and_ints():
    tok = trained()
    ids = tok.encode("héllo wörld")
    dec = tok.decoder()
    assert dec.feed(iter(ids[:2])) + dec.feed(tuple(ids[2:])) + dec.feed([]) + dec.flush() == "héllo wörld"


def test_numpy_ids():
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    tok = trained()
    ids = tok.encode("héllo 🦊 wörld")
    dec = tok.decoder()
    arr = np.array(ids, dtype=np.uint32)
    out = dec.feed(arr[:3]) + "".join(dec.feed(i) for i in arr[3:]) + dec.flush()  # an array, then numpy ints
    assert out == "héllo 🦊 wörld"
    assert dec.feed(np.array(ids[0])) == tok.decode(ids[:1])  # a 0-d array is one id


def test_errors():
    tok = trained()
    with pytest.raises(ValueError, match="not an error handler"):
        tok.decoder(errors="replcae")
    with pytest.raises(TypeError, match="errors must be a str"):
        tok.decoder(errors=None)
    dec = tok.decoder()
    with pytest.raises(TypeError, match="not a str"):
        dec.feed("abc")
    with pytest.raises(TypeError):
        dec.feed(True)
    with pytest.raises(TypeError):
        dec.feed(1.5)
    with pytest.raises(ValueError, match="token id"):
        dec.feed(10**9)
    with pytest.raises(ValueError, match="token id"):
        dec.feed([1, -1])
    # A refused feed leaves the decoder as it was.
    b = "é".encode()
    dec.feed(b[0])
    with pytest.raises(ValueError):
        dec.feed([b[1], 10**9])
    assert dec.feed(b[1]) == "é"
    assert "StreamDecoder" in repr(dec)


# -- properties -------------------------------------------------------------------


@given(text=st.text(max_size=80), data=st.data())
def test_hypothesis_text(text, data):
    tok = trained()
    ids = tok.encode(text, allowed_special="all")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=6)))
    dec = tok.decoder()
    out, last = [], 0
    for c in cuts + [len(ids)]:
        out.append(dec.feed(ids[last:c]))
        last = c
    assert "".join(out) + dec.flush() == tok.decode(ids)


@pytest.mark.parametrize("key", ["trained", "cl100k_base"])
@given(ids=st.lists(st.one_of(st.integers(0, 300), st.integers(0, 100_300)), max_size=40), data=st.data(),
       errors=st.sampled_from(["replace", "strict", "ignore", "backslashreplace", "surrogateescape"]))
def test_hypothesis_arbitrary_ids(key, ids, data, errors):
    """Any ids, invalid UTF-8 included (byte tokens 128..255 alone, tokens
    that end mid-character): the stream decodes as decode() does, or
    raises where decode() raises (strict)."""
    tok = tokenizer(key)
    known = set(tok.special_tokens.values())
    ids = [i for i in ids if i in tok.vocab or i in known]
    step = data.draw(st.integers(1, 4))
    try:
        whole = tok.decode(ids, errors=errors)
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            streamed(tok, ids, errors, step)
        return
    pieces, rest = streamed(tok, ids, errors, step)
    assert "".join(pieces) + rest == whole


@given(text=st.text(st.characters(codec="utf-8"), max_size=60))
def test_hypothesis_cl100k(text):
    tok = openai("cl100k_base")
    ids = tok.encode(text, disallowed_special=())
    pieces, rest = streamed(tok, ids)
    assert "".join(pieces) + rest == text
    assert rest == ""
