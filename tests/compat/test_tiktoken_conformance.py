"""bpe as a drop-in for tiktoken: every name of tiktoken's ``Encoding`` and
module, against tiktoken itself, for r50k_base, cl100k_base and o200k_base:
the same results, and the same exception types, on hypothesis text (special
tokens, lone surrogates, invalid UTF-8 bytes and unknown ids among it)."""

from __future__ import annotations

import pickle

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from conftest import ENCODINGS, require_vocab, shared_file

# What each tiktoken encoding is compared on.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    require_vocab(request.param)
    return bpe.get_encoding(request.param), tiktoken.get_encoding(request.param)


def outcome(f):
    """What a call gives: ("ok", value) or ("raises", exception type)."""
    try:
        return "ok", f()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return "raises", type(e)


def same(ours, theirs, *, exact_type: bool = False):
    """Our outcome matches tiktoken's: equal values, or an exception that is
    an instance of tiktoken's type (ours may also be a ValueError)."""
    a, b = outcome(ours), outcome(theirs)
    if b[0] == "ok":
        assert a == b, (a, b)
    else:
        assert a[0] == "raises", f"tiktoken raised {b[1].__name__}, bpe returned {a[1]!r}"
        assert issubclass(a[1], b[1]) if not exact_type else a[1] is b[1], (a[1], b[1])


# -- text with what breaks tokenizers in it ----------------------------------------

SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>", "<|fim_middle|>", "<|fim_suffix|>"]
pieces = st.one_of(
    st.text(max_size=20),
    st.sampled_from(SPECIALS + ["<|endoftext", "|>", "<|", " ", "\n\n", "  \n", "'s", "123456", "😀", "ﬀ"]),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF).map(str),  # lone surrogates
)
texts = st.lists(pieces, max_size=12).map("".join)
policies = st.sampled_from([
    {},
    {"allowed_special": "all"},
    {"allowed_special": {"<|endoftext|>"}},
    {"disallowed_special": ()},
    {"disallowed_special": {"<|endoftext|>"}},
    {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
    {"allowed_special": "all", "disallowed_special": ()},
    {"allowed_special": frozenset(), "disallowed_special": "all"},
])
quick = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def known(enc, policy: dict) -> dict:
    """The policy with special tokens this encoding lacks left out (each
    library refuses unknown names in its own way)."""
    fix = {}
    for k, v in policy.items():
        fix[k] = v if isinstance(v, str) else type(v)(t for t in v if t in enc._special_tokens)
    return fix


# -- attributes and names --------------------------------------------------------------


def test_every_public_name_of_tiktokens_encoding_is_there(pair):
    ours, _ = pair
    names = [n for n in vars(tiktoken.Encoding) if not n.startswith("__") and n not in ("_encode_only_native_bpe",)]
    names += ["name", "max_token_value", "_pat_str", "_mergeable_ranks", "_special_tokens"]
    missing = [n for n in names if not hasattr(ours, n)]
    assert not missing, missing


def test_attributes(pair):
    ours, theirs = pair
    assert ours.name == theirs.name and repr(ours) == repr(theirs)
    assert (ours.n_vocab, ours.max_token_value, ours.eot_token) == (theirs.n_vocab, theirs.max_token_value,
                                                                    theirs.eot_token)
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert dict(ours._special_tokens) == theirs._special_tokens and ours._pat_str == theirs._pat_str
    assert dict(ours._mergeable_ranks) == theirs._mergeable_ranks
    assert ours.token_byte_values() == theirs.token_byte_values()
    with pytest.raises(TypeError):
        ours._mergeable_ranks[b"x"] = 1  # read-only views
    with pytest.raises(TypeError):
        ours._special_tokens["x"] = 1
    for i in [0, 255, theirs.eot_token, theirs.max_token_value, theirs.max_token_value + 1]:
        assert ours.is_special_token(i) == theirs.is_special_token(i)


def test_module_functions():
    for name in ENCODINGS:
        require_vocab(name)
        assert bpe.get_encoding(name) is bpe.get_encoding(name)  # made once per process
    from tiktoken_ext import openai_public  # OpenAI's own (other installed plugins add more)

    assert set(openai_public.ENCODING_CONSTRUCTORS) <= set(bpe.list_encoding_names())
    import tiktoken.model as model

    for table in (model.MODEL_TO_ENCODING, model.MODEL_PREFIX_TO_ENCODING):
        for m in table:
            assert bpe.encoding_name_for_model(m) == tiktoken.encoding_name_for_model(m), m
            dated = m + "-2099-01-01"
            same(lambda: bpe.encoding_name_for_model(dated), lambda: tiktoken.encoding_name_for_model(dated))
    same(lambda: bpe.encoding_name_for_model("no-such-model"), lambda: tiktoken.encoding_name_for_model("no-such-model"))
    same(lambda: bpe.get_encoding("no_such_encoding"), lambda: tiktoken.get_encoding("no_such_encoding"))
    require_vocab("o200k_base")
    assert bpe.encoding_for_model("gpt-4o").name == "o200k_base"


def test_the_constructor_tiktoken_users_know(pair):
    ours, theirs = pair
    made = bpe.Encoding(theirs.name, pat_str=theirs._pat_str, mergeable_ranks=theirs._mergeable_ranks,
                        special_tokens=theirs._special_tokens)
    assert made == ours and made.name == theirs.name and isinstance(made, bpe.Tokenizer)
    with pytest.raises(ValueError):
        bpe.Encoding("x", pat_str=theirs._pat_str, mergeable_ranks=theirs._mergeable_ranks,
                     special_tokens=theirs._special_tokens, explicit_n_vocab=theirs.n_vocab + 1)


def test_pickling(pair):
    ours, theirs = pair
    assert pickle.loads(pickle.dumps(ours)) is ours  # a registered encoding, by name
    made = bpe.Encoding("mine", pat_str=theirs._pat_str, mergeable_ranks=theirs._mergeable_ranks,
                        special_tokens=theirs._special_tokens)
    back = pickle.loads(pickle.dumps(made))
    assert back == made and back.name == "mine" and repr(back) == "<Encoding 'mine'>"


# -- encoding ---------------------------------------------------------------------


@quick
@given(text=texts, policy=policies)
def test_encode_under_every_special_token_policy(pair, text, policy):
    ours, theirs = pair
    policy = known(theirs, policy)
    same(lambda: ours.encode(text, **policy), lambda: theirs.encode(text, **policy))
    # (tiktoken's encode_to_numpy raises UnicodeEncodeError on a lone
    # surrogate, where its encode replaces it; bpe's replaces it in both.)
    same(lambda: ours.encode_to_numpy(text, **policy).tolist(), lambda: theirs.encode(text, **policy))
    same(lambda: ours.encode_batch([text, text[::-1]], **policy),
         lambda: theirs.encode_batch([text, text[::-1]], **policy))


@quick
@given(text=texts)
def test_encode_ordinary_and_its_batch(pair, text):
    ours, theirs = pair
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.encode_ordinary_batch([text, "", text]) == theirs.encode_ordinary_batch([text, "", text])


@quick
@given(text=texts, policy=policies)
def test_encode_with_unstable(pair, text, policy):
    ours, theirs = pair
    policy = known(theirs, policy)
    # (tiktoken's raises UnicodeEncodeError on a lone surrogate; bpe's
    # replaces it, as encode does in both.)
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    a, b = outcome(lambda: ours.encode_with_unstable(text, **policy)), outcome(
        lambda: theirs.encode_with_unstable(fixed, **policy))
    if b[0] == "raises":
        assert a[0] == "raises" and issubclass(a[1], b[1])
    else:
        assert a[0] == "ok", a
        assert a[1][0] == b[1][0]
        assert {tuple(c) for c in a[1][1]} == {tuple(c) for c in b[1][1]}


@quick
@given(data=st.one_of(st.binary(max_size=40), texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
                      st.builds(lambda t, b: t.encode("utf-8", "replace") + b, texts, st.binary(max_size=4))))
def test_encode_bytes(pair, data):
    ours, theirs = pair
    assert ours._encode_bytes(data) == theirs._encode_bytes(data)
    assert ours.encode_bytes(data) == theirs._encode_bytes(data)
    if data:  # (tiktoken's panics on b"": a PanicException, not an Exception)
        assert ours._encode_single_piece(data) == theirs._encode_single_piece(data)
    else:
        assert ours._encode_single_piece(data) == []


def test_encode_single_token(pair):
    ours, theirs = pair
    for token in [*theirs.special_tokens_set, "hello", " world", b"\xff", "a", b"hello world!!", "hello world!!",
                  b"", *theirs.token_byte_values()[::997]]:
        same(lambda: ours.encode_single_token(token), lambda: theirs.encode_single_token(token))
    same(lambda: ours.encode_single_token(3), lambda: theirs.encode_single_token(3))


def test_wrong_types_raise_type_errors(pair):
    ours, theirs = pair
    for call in ["encode", "encode_ordinary"]:
        for bad in [3, b"abc", None]:
            same(lambda: getattr(ours, call)(bad), lambda: getattr(theirs, call)(bad))
    same(lambda: ours.encode_batch(["a", 3]), lambda: theirs.encode_batch(["a", 3]))


# -- decoding ---------------------------------------------------------------------

ids = st.lists(st.one_of(st.integers(0, 300), st.integers(0, 210_000), st.sampled_from([100257, 199999, 50256])),
               max_size=12)


@quick
@given(tokens=ids, errors=st.sampled_from(["replace", "strict", "ignore"]))
def test_decoders_on_any_ids(pair, tokens, errors):
    ours, theirs = pair
    same(lambda: ours.decode_bytes(tokens), lambda: theirs.decode_bytes(tokens))
    same(lambda: ours.decode(tokens, errors=errors), lambda: theirs.decode(tokens, errors=errors))
    same(lambda: ours.decode_tokens_bytes(tokens), lambda: theirs.decode_tokens_bytes(tokens))
    same(lambda: ours.decode_with_offsets(tokens), lambda: theirs.decode_with_offsets(tokens))
    same(lambda: ours.decode_batch([tokens, tokens[:3]], errors=errors),
         lambda: theirs.decode_batch([tokens, tokens[:3]], errors=errors))
    same(lambda: ours.decode_bytes_batch([tokens, []]), lambda: theirs.decode_bytes_batch([tokens, []]))


@quick
@given(text=texts)
def test_decoders_on_the_ids_of_text(pair, text):
    ours, theirs = pair
    tokens = theirs.encode(text, allowed_special="all")
    assert ours.decode_with_offsets(tokens) == theirs.decode_with_offsets(tokens) if outcome(
        lambda: theirs.decode_with_offsets(tokens))[0] == "ok" else True
    assert ours.decode(tokens) == theirs.decode(tokens)


def test_unknown_and_out_of_range_ids(pair):
    ours, theirs = pair
    top = theirs.max_token_value
    for bad in [top + 1, top + 1000, 2**32 - 1, -1, 2**32, 2**40]:
        same(lambda: ours.decode([1, bad]), lambda: theirs.decode([1, bad]))
        same(lambda: ours.decode_single_token_bytes(bad), lambda: theirs.decode_single_token_bytes(bad))
    for t in [0, 255, theirs.eot_token, top]:
        same(lambda: ours.decode_single_token_bytes(t), lambda: theirs.decode_single_token_bytes(t))
    same(lambda: ours.decode("ab"), lambda: theirs.decode("ab"))
    lone = theirs.encode_single_token(b"\xff")  # bytes that are not UTF-8 make decode look up the handler
    same(lambda: ours.decode([lone], errors="no-such-handler"), lambda: theirs.decode([lone], errors="no-such-handler"))
    # Our errors are ValueErrors too (bpe's own contract).
    with pytest.raises(ValueError):
        ours.decode([top + 1])
    with pytest.raises(ValueError):
        ours.decode([-1])


def test_empty_inputs(pair):
    ours, theirs = pair
    for name in ["encode", "encode_ordinary"]:
        assert getattr(ours, name)("") == getattr(theirs, name)("")
    assert ours.encode_batch([]) == theirs.encode_batch([]) and ours.decode_batch([]) == theirs.decode_batch([])
    assert ours.decode([]) == theirs.decode([]) and ours.decode_with_offsets([]) == theirs.decode_with_offsets([])
    assert ours._encode_bytes(b"") == theirs._encode_bytes(b"")
    assert ours.encode_with_unstable("") == (theirs.encode_with_unstable("")[0], [])


@pytest.mark.parametrize("rel", ["bench/gutenberg100m.txt.xz", "mid/code_mix.txt.xz",
                                 "mid/flores200_devtest_184langs.txt.xz"])
def test_shared_corpora(pair, rel):
    """The first 2 MB of each shared corpus, as 200 documents, through every
    encoder and decoder of both libraries."""
    import lzma

    ours, theirs = pair
    with lzma.open(shared_file(rel), "rb") as f:
        raw = f.read(2 << 20)
    docs = [raw[i:i + 10_000].decode("utf-8", "replace") for i in range(0, len(raw), 10_000)]
    assert ours.encode_ordinary_batch(docs) == theirs.encode_ordinary_batch(docs)
    assert ours.encode_batch(docs, allowed_special="all") == theirs.encode_batch(docs, allowed_special="all")
    ids = theirs.encode_ordinary_batch(docs)
    assert ours.decode_batch(ids) == theirs.decode_batch(ids)
    assert ours.decode_bytes_batch(ids) == theirs.decode_bytes_batch(ids)
    for d, t in list(zip(docs, ids))[::20]:
        assert ours.decode_with_offsets(t) == theirs.decode_with_offsets(t)
        assert ours.encode_to_numpy(d).tolist() == t
        cut = d.encode()[: len(d.encode()) // 2 + 1]  # most likely ends mid-character
        assert ours._encode_bytes(cut) == theirs._encode_bytes(cut)
        assert ours.encode_with_unstable(d[:200])[0] == theirs.encode_with_unstable(d[:200])[0]
