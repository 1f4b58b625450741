"""bpe.pretokenize (Rust, fancy-regex) must equal Python regex.findall."""

import functools
import sys

import regex
import pytest
import tiktoken
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

# The one place the engines disagree: Unicode versions. Python's `regex` follows
# the newest Unicode (17.0 in 2026); Rust's regex-syntax, which tiktoken also
# uses, is one version behind (16.0). Characters added in 17.0 (about 4,700,
# e.g. CJK Extension J) are letters to `regex` and unassigned (so punctuation-
# like) to Rust; U+0295 moved from Ll to Lo. tiktoken is the target, so these
# are compared with tiktoken (test_tiktoken_splits), not with `regex`.
CLASSES = [r"\p{L}", r"\p{N}", r"\s", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}"]


@functools.lru_cache(maxsize=None)
def unicode_version_differences() -> frozenset:
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    diff = set()
    for cls in CLASSES:
        diff |= set(bpe.pretokenize(every, cls)) ^ set(regex.findall(cls, every))
    return frozenset(diff)


def test_engines_differ_only_by_unicode_version():
    diff = unicode_version_differences()
    # Everything that differs is a character Rust's tables do not know yet
    # (newer than Unicode 16), except U+0295, reclassified in Unicode 17.
    # (If `regex` and Rust's tables ever share a version, this set is empty.)
    known_to_rust = {c for c in diff if bpe.pretokenize(c, r"[\p{L}\p{M}\p{N}\p{P}\p{S}\p{Z}\p{C}]") == [c]
                     and bpe.pretokenize(c, r"\p{Cn}") == []}
    assert known_to_rust <= {"\u0295"}
    assert len(diff) < 10_000


@pytest.mark.parametrize("name", NAMES)
@given(text=TEXT)
def test_hypothesis(name, text):
    diff = unicode_version_differences()
    text = "".join(c for c in text if c not in diff)
    assert bpe.pretokenize(text, name) == regex.findall(TIKTOKEN_PATTERNS[name], text)


def tiktoken_chunks_equal(text: str, chunks: list[str], pattern: str) -> bool:
    """Whether tiktoken splits `text` into exactly `chunks`.

    tiktoken does not expose its split, so we ask it indirectly: a vocabulary
    of the 256 bytes plus one token per distinct chunk. Merges never cross a
    chunk boundary, so tiktoken's ids are one id per chunk, those ids, exactly
    when its chunks are ours; any other split leaves some text as bytes.
    """
    ranks = {bytes([i]): i for i in range(256)}
    for c in chunks:
        ranks.setdefault(c.encode("utf-8"), len(ranks))
    enc = tiktoken.Encoding("split-probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return enc.encode_ordinary(text) == [ranks[c.encode("utf-8")] for c in chunks]


NEW_IN_UNICODE_17 = st.sampled_from(["\U000323b0", "\u0295", "\ua7ce", "\u088f", "\U00011de0"])


@pytest.mark.parametrize("name", NAMES)
@given(text=st.one_of(TEXT, st.lists(st.one_of(PIECES, NEW_IN_UNICODE_17)).map("".join)))
def test_tiktoken_splits(name, text):
    chunks = bpe.pretokenize(text, name)
    assert "".join(chunks) == text
    assert tiktoken_chunks_equal(text, [c for c in chunks if c], TIKTOKEN_PATTERNS[name])


def test_recorded_unicode17_case():
    # Found by hypothesis: U+323B0 (CJK Ext. J, Unicode 17) followed by ':'.
    text = "\U000323b0:"
    assert regex.findall(bpe.GPT4_PATTERN, text) == ["\U000323b0", ":"]  # a letter, then punctuation
    assert bpe.pretokenize(text, "gpt4") == ["\U000323b0:"]  # unassigned to Rust: one punctuation run
    assert tiktoken_chunks_equal(text, ["\U000323b0:"], bpe.GPT4_PATTERN)


def test_lone_surrogates_are_refused_clearly():
    # A str with a lone surrogate has no UTF-8 form, so Rust cannot see it;
    # Python's UnicodeEncodeError (a ValueError) says so. (encode() replaces
    # them with U+FFFD first, as tiktoken does.)
    with pytest.raises(UnicodeEncodeError):
        bpe.pretokenize("a\ud800b")
