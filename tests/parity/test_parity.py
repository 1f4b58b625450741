"""tiktoken parity: with OpenAI's vocabularies we produce tiktoken's ids, exactly.

For r50k_base, cl100k_base and o200k_base: `encode`, `encode_ordinary`,
`encode(allowed_special="all")`, `decode` and `decode_bytes` against tiktoken on
every corpus (shipped and in ../shared) and on hypothesis text biased to the
cases where tokenizers disagree. Where tiktoken itself fails (it panics on some
long white-space runs), the expected ids come from the reference split (Python
`regex`) with tiktoken's BPE applied to each chunk.
"""

import functools
import lzma
import os
import sys

import pytest
import regex
import tiktoken
from hypothesis import HealthCheck, given, settings, strategies as st

import bpe
from conftest import CORPUS_FILES, ENCODINGS, require_vocab, shared_file

# >= 10,000 seeded examples per encoding in CI; fewer on a developer's run.
EXAMPLES = 10_000 if os.environ.get("CI") else 400


@functools.lru_cache(maxsize=None)
def pair(name):
    require_vocab(name)
    return bpe.Tokenizer.from_tiktoken(name), tiktoken.get_encoding(name)


@functools.lru_cache(maxsize=None)
def whole_chunk_encoder(name):
    """tiktoken with `name`'s ranks and a pattern that takes the text whole:
    tiktoken's BPE of one chunk, with no splitting."""
    _, enc = pair(name)
    return tiktoken.Encoding(f"{name}-whole", pat_str=r"[\s\S]+", mergeable_ranks=enc._mergeable_ranks,
                             special_tokens={})


def reference_ids(name, text):
    """Python `regex` split + tiktoken's BPE on each chunk."""
    _, enc = pair(name)
    whole = whole_chunk_encoder(name)
    return [i for chunk in regex.findall(enc._pat_str, text) for i in whole.encode_ordinary(chunk)]


def expected_ordinary(name, text):
    _, enc = pair(name)
    try:
        return enc.encode_ordinary(text)
    except BaseException as e:  # tiktoken's PanicException is a BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return reference_ids(name, text)


def check(name, text):
    """Every encode/decode path on one text."""
    ours, enc = pair(name)
    ids = ours.encode_ordinary(text)
    assert ids == expected_ordinary(name, text)
    assert ours.decode_bytes(ids) == enc.decode_bytes(ids)
    assert ours.decode(ids) == enc.decode(ids)
    # Special tokens: the default refuses special-token text, like tiktoken.
    try:
        theirs = enc.encode(text)
    except ValueError:
        with pytest.raises(ValueError):
            ours.encode(text)
    else:
        assert ours.encode(text) == theirs
    all_ids = ours.encode(text, allowed_special="all")
    assert all_ids == enc.encode(text, allowed_special="all")
    assert ours.decode(all_ids) == enc.decode(all_ids)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_shipped_corpora(name, path):
    check(name, path.read_text(encoding="utf-8"))


SHARED_FILES = ["bench/gutenberg100m.txt.xz", "bench/enwiki2015_extract100m.txt.xz",
                "mid/code_mix.txt.xz", "mid/flores200_devtest_184langs.txt.xz"]


def pieces(text, size=4_000_000):
    """Cuts a large text at newlines into pieces of about `size` characters
    (both tokenizers get the same pieces, so where we cut does not matter)."""
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


@pytest.mark.slow
@pytest.mark.parametrize("rel", SHARED_FILES)
def test_shared_corpora(rel):
    path = shared_file(rel)
    with lzma.open(path, "rt", encoding="utf-8") as f:
        texts = pieces(f.read())
    for name in ENCODINGS:
        ours, enc = pair(name)
        ids = ours.encode_batch(texts, disallowed_special=())
        assert ids == enc.encode_ordinary_batch(texts, num_threads=2), name
        assert ours.encode_batch(texts, allowed_special="all") == enc.encode_batch(
            texts, allowed_special="all", num_threads=2), name
        assert [ours.decode_bytes(x) for x in ids] == enc.decode_bytes_batch(ids), name


# --- hypothesis: text biased to the hard cases ------------------------------

SPACES = " \t\r\n\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"]


def any_case(word):
    return st.tuples(*[st.sampled_from([c.lower(), c.upper()]) for c in word]).map("".join)


space_runs = st.text(alphabet=SPACES, min_size=1, max_size=12)
digit_runs = st.integers(1, 40).flatmap(lambda n: st.text(alphabet="0123456789٠١٢३४५", min_size=n, max_size=n))
contractions = st.sampled_from(["s", "t", "re", "ve", "m", "ll", "d"]).flatmap(any_case).map(lambda c: "'" + c)
marks = st.tuples(st.sampled_from("aeiouAEIOUnзя"), st.text(alphabet="\u0301\u0308\u0327\u0903\u093f\u0e31", min_size=1, max_size=3)).map("".join)
scripts = st.sampled_from(["hello", "World", "日本語", "한국어", "ﺍﻟﻌﺮﺑﻴﺔ", "עברית", "Ελληνικά", "русский", "हिन्दी", "ไทย",
                           "ǅemal", "ﬁnance", "ΣΑΣ", "straße", "ſtuff", "\U000323b0", "ʕ"])
emoji = st.sampled_from(["🙂", "👩‍👩‍👧", "👍🏽", "🏳️‍🌈", "🇫🇷", "1️⃣", "🧑🏿‍🚀", "\u200d", "\ufe0f"])
punct = st.text(alphabet="!?.,;:/\\'\"()[]{}<>|-_=+*&^%$#@~`", min_size=1, max_size=5)
surrogates = st.sampled_from(["\ud800", "\udfff", "\ud83d", "a\udc00b"])  # lone: replaced like tiktoken
specials = st.sampled_from(SPECIALS + ["<|endoftext", "<|", "|>"])
atoms = st.one_of(space_runs, digit_runs, contractions, marks, scripts, emoji, punct, specials, surrogates,
                  st.text(max_size=8), st.characters())
TEXTS = st.lists(atoms, max_size=24).map("".join)


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=TEXTS)
def test_hypothesis(name, text):
    check(name, text)


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=EXAMPLES // 10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.one_of(st.sampled_from(SPECIALS), TEXTS), max_size=6),
       mode=st.sampled_from(["none", "all", "some", "off"]), data=st.data())
def test_special_token_modes(name, parts, mode, data):
    ours, enc = pair(name)
    text = "".join(parts)
    known = sorted(ours.special_tokens)
    some = set(data.draw(st.lists(st.sampled_from(known), max_size=3)))
    kwargs = {"none": {}, "all": {"allowed_special": "all"}, "some": {"allowed_special": some},
              "off": {"disallowed_special": ()}}[mode]
    try:
        theirs = enc.encode(text, **kwargs)
    except ValueError:
        with pytest.raises(ValueError):
            ours.encode(text, **kwargs)
        return
    assert ours.encode(text, **kwargs) == theirs


# --- million-character runs --------------------------------------------------

RUNS = ["a", " ", "\t", "\n", "1", "!", "\u3000", " \t", "ab", "🙂", "é", "\r\n"]


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("unit", RUNS, ids=repr)
@pytest.mark.parametrize("tail", ["", "x"], ids=["end", "then-x"])
def test_million_character_runs(name, unit, tail):
    ours, _ = pair(name)
    text = unit * (1_000_000 // len(unit)) + tail
    assert ours.encode_ordinary(text) == expected_ordinary(name, text)


# Found by these tests: tiktoken 0.14 panics (a stack overflow in fancy-regex's
# backtracking) on these; we return the reference's ids.
TIKTOKEN_FAILS = [
    ("r50k_base", " " * 1_000_000 + "x"),
    ("cl100k_base", " " * 1_000_000 + "x"),
    ("o200k_base", " " * 1_000_000),
    ("o200k_base", "\t" * 1_000_000),
    ("o200k_base", "\u3000" * 1_000_000),
    ("o200k_base", " \t" * 500_000),
]


@pytest.mark.parametrize("name,text", TIKTOKEN_FAILS, ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_where_tiktoken_panics_we_do_not(name, text):
    ours, enc = pair(name)
    with pytest.raises(BaseException) as e:  # pyo3_runtime.PanicException
        enc.encode_ordinary(text)
    assert "Panic" in type(e.value).__name__
    assert ours.encode_ordinary(text) == reference_ids(name, text)


# A long str's UTF-8 is made by the core (rust/py/text.rs), not by CPython,
# for latin-1, UCS-2 and UCS-4 strings; ASCII ones are read as they are, and
# a str with surrogates takes CPython's path (and the tiktoken replacement).
LONG = [
    "plain ASCII words, 123 and more. " * 200,
    "café, naïve, ß and ÿ; " * 300,  # latin-1
    "it\u2019s \u201cquoted\u201d Жизнь 日本語 " * 300,  # UCS-2
    "emoji 🙂 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 text " * 300,  # UCS-4
    "lone \ud800 surrogate in UCS-2 Ж " * 300,
    "a pair \ud83d\ude42 of lone surrogates, é " * 300,
    "UCS-4 🙂 with a lone \udfff " * 300,
]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("k", range(len(LONG)))
def test_long_strings_of_every_kind(name, k):
    ours, theirs = pair(name)
    text = LONG[k]
    want = theirs.encode_ordinary(text)
    assert ours.encode_ordinary(text) == want
    assert ours.encode_to_numpy(text, disallowed_special=()).tolist() == want
    assert ours.encode(text) == want
    assert ours.encode(text, num_threads=2) == want


@pytest.mark.parametrize("tail", ["é", "ÿé", "Ж", "日本", "€", "Жé€", "🙂", "a"])
@pytest.mark.parametrize("body", ["é" * 5000, "ab ÿ" * 1500, "日本語 " * 1500, "Жизнь" * 1000, "x" * 4095 + "Ж"])
def test_the_core_utf8_at_exact_length(body, tail):
    """The core makes the UTF-8 of a long latin-1 or UCS-2 str itself
    (rust/py/text.rs; latin-1 into a buffer of exactly its length, UCS-2 a
    block at a time into room for the worst case): texts made only of 2- and
    3-byte characters, and texts that end in one, encode to the ids of their
    UTF-8 (tiktoken's) and decode back to themselves."""
    ours, theirs = pair("cl100k_base")
    text = body + tail
    want = theirs.encode_ordinary(text)
    assert ours.encode_ordinary(text) == want
    assert ours.encode_to_numpy(text).tolist() == want
    assert ours.decode(want) == text


@pytest.mark.parametrize("at", [0, 8191, 8192, 8193, 20000, -1])
def test_one_surrogate_in_any_block_of_a_ucs2_str(at):
    """The core converts a UCS-2 str a block of 8192 units at a time,
    looking for surrogates in each block before converting it: one lone
    surrogate anywhere, the first unit, either side of a block's end or the
    last unit of a str of four blocks, sends the whole str to the replacing
    path (tiktoken's ids), with nothing of the blocks before it kept."""
    ours, theirs = pair("cl100k_base")
    units = list(("Жизнь ’quoted’ " * 2000)[:30000])
    units[at] = "\udc00"
    text = "".join(units)
    want = expected_ordinary("cl100k_base", text)
    assert ours.encode_ordinary(text) == want
    assert ours.encode_to_numpy(text).tolist() == want
    assert ours.encode(text, num_threads=2) == want
    clean = text.replace("\udc00", "x")
    assert ours.encode_to_numpy(clean).tolist() == theirs.encode_ordinary(clean)


@settings(max_examples=EXAMPLES // 20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=TEXTS.filter(bool), chars=st.integers(4096, 9000))
def test_long_strings_convert_as_python_does(text, chars):
    """The core's own str -> UTF-8 (simdutf, for strs of 4096 characters or
    more: rust/py/text.rs) against CPython's, on hypothesis text of every
    kind (latin-1, UCS-2, UCS-4, lone surrogates) repeated past that length:
    the same ids as tiktoken, by every call that converts, and, where the
    str has UTF-8, decoded back to itself."""
    ours, _ = pair("cl100k_base")
    text = (text * (chars // len(text) + 1))[:chars]
    rest = text[1:]
    size = sys.getsizeof(text)
    got = [ours.encode_ordinary(text), ours.encode_to_numpy(text, disallowed_special=()).tolist()]
    batch = ours.encode_batch([text, rest], disallowed_special=())
    # Ours ran on the str's units: CPython made no UTF-8 of it (tiktoken,
    # below, makes one, which the core would then borrow).
    assert sys.getsizeof(text) == size
    want = expected_ordinary("cl100k_base", text)
    assert got == [want, want]
    assert batch == [want, expected_ordinary("cl100k_base", rest)]
    if not any("\ud800" <= c <= "\udfff" for c in text):
        assert ours.decode(want) == text


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_core_makes_the_utf8(k):
    """For a surrogate-free non-ASCII str the core converts the text itself:
    CPython's cached UTF-8 (which sys.getsizeof counts) is never made."""
    ours, _ = pair("cl100k_base")
    text = LONG[k] + str(k)  # a str of our own, whose UTF-8 nobody asked for
    size = sys.getsizeof(text)
    ours.encode_ordinary(text)
    ours.encode_to_numpy(text, disallowed_special=())
    assert sys.getsizeof(text) == size
    text.encode("utf-8")  # (makes no cache either)
    assert sys.getsizeof(text) == size


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_batches_of_long_strings_of_every_kind(name):
    """encode_batch converts its documents' UTF-8 on its threads (the same
    kinds as above, and a batch with surrogates takes the replacing path)."""
    ours, theirs = pair(name)
    clean = [t + str(i) for i, t in enumerate(LONG) if not any("\ud800" <= c <= "\udfff" for c in t)]
    assert len(clean) == 4
    want = [theirs.encode_ordinary(t) for t in clean]
    assert ours.encode_batch(clean, num_threads=2, disallowed_special=()) == want
    ids, offsets = ours.encode_batch_to_numpy(clean, num_threads=2, disallowed_special=())
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(clean))] == want
    assert ours.encode_batch(LONG, num_threads=2) == [theirs.encode_ordinary(t) for t in LONG]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_a_batch_shares_its_long_documents(name):
    """A document much longer than the rest of its batch is cut into pieces
    that the threads share (and the longest runs go first): the ids stay
    tiktoken's, wherever the long documents stand, special tokens allowed
    in them included."""
    ours, theirs = pair(name)
    eot = "<|endoftext|>"
    long = [
        p.read_text(encoding="utf-8").replace("\n\n", f"\n{eot}\n", 50) for p in CORPUS_FILES
    ]
    short = [t[i * 997 : i * 997 + 2_000] for i, t in enumerate(long * 20)]
    for texts in (short + long, long + short, short[:20] + long[:1] + short[20:]):
        want = [theirs.encode(t, allowed_special={eot}) for t in texts]
        assert ours.encode_batch(texts, num_threads=3, allowed_special={eot}) == want
        ids, offsets = ours.encode_batch_to_numpy(texts, num_threads=2, allowed_special={eot})
        assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want
