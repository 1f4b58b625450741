"""bpe.pretokenize (Rust, fancy-regex) must equal Python regex.findall."""

import regex
import pytest
from hypothesis import given, strategies as st

import bpe
from conftest import CORPUS_FILES

# tiktoken's pat_str for r50k_base, cl100k_base and o200k_base, copied verbatim
# from tiktoken_ext/openai_public.py (tiktoken 0.14).
TIKTOKEN_PATTERNS = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    "gpt4": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "gpt4o": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}
NAMES = list(TIKTOKEN_PATTERNS)

# U+001C..U+001F (the "file separators") are white space to Python's
# str.isspace() but not to Unicode's White_Space property; both regex engines
# follow White_Space, and these tests include them (see the PIECES below).


def test_patterns_equal_tiktoken():
    assert bpe.GPT2_PATTERN == TIKTOKEN_PATTERNS["gpt2"]
    assert bpe.GPT4_PATTERN == TIKTOKEN_PATTERNS["gpt4"]
    assert bpe.GPT4O_PATTERN == TIKTOKEN_PATTERNS["gpt4o"]


@pytest.mark.parametrize("alias,name", [("r50k", "gpt2"), ("cl100k", "gpt4"), ("o200k", "gpt4o")])
def test_aliases(alias, name):
    assert bpe.resolve_pattern(alias) == bpe.resolve_pattern(name) == TIKTOKEN_PATTERNS[name]


def test_custom_regex_and_bad_names():
    assert bpe.pretokenize("ab cd", r"\w+") == ["ab", "cd"]
    with pytest.raises(ValueError, match="unknown pattern name 'gpt5'"):
        bpe.pretokenize("x", "gpt5")
    with pytest.raises(ValueError, match="invalid split pattern"):
        bpe.pretokenize("x", "((")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpora(name, path):
    text = path.read_text(encoding="utf-8")
    assert bpe.pretokenize(text, name) == regex.findall(TIKTOKEN_PATTERNS[name], text)


# Text biased towards what splits differently: spaces of every kind, newlines,
# digits, contractions in any case, letters with combining marks, punctuation.
PIECES = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u0085", "\u2028", "\u3000", "'s", "'S", "'re",
     "'LL", "'t", "123", "4567", "é", "e\u0301", "ß", "Ω", "日本", "🙂", "👩‍👩‍👧", "a", "Zz", "!", "/", "?!", "\x1c", "\x1f", "\x0b", "\x0c"]
)
TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=["Cs"])),
    st.lists(PIECES).map("".join),
)


@pytest.mark.parametrize("name", NAMES)
@given(text=TEXT)
def test_hypothesis(name, text):
    assert bpe.pretokenize(text, name) == regex.findall(TIKTOKEN_PATTERNS[name], text)


def test_lone_surrogates_are_refused_clearly():
    # A str with a lone surrogate has no UTF-8 form, so Rust cannot see it;
    # Python's UnicodeEncodeError (a ValueError) says so. (encode() replaces
    # them with U+FFFD first, as tiktoken does.)
    with pytest.raises(UnicodeEncodeError):
        bpe.pretokenize("a\ud800b")
