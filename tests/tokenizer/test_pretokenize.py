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

# The one place the engines disagree: Unicode versions. Python's `regex` and
# Rust's regex-syntax (which fancy-regex and tiktoken use) each carry their own
# Unicode tables, and `regex` follows new Unicode releases sooner: in 2026 it
# was at 17.0 and then 18.0 while regex-syntax was at 16.0. A character added in
# a newer version is a letter (say) to `regex` and unassigned (so punctuation-
# like) to Rust; a few older characters change category (U+0295: Ll -> Lo in 17).
# tiktoken is the target, so on those characters we are compared with tiktoken
# (test_tiktoken_splits), not with `regex`.
#
# No count is written down: the test derives the set from the two engines' own
# tables (the general category and White_Space of every code point, as each
# engine sees them) and checks that the splits differ nowhere else.
GENERAL_CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
                      "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
                      "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"]  # and Cs: no UTF-8, left out
EVERY_CHAR = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)


def engine_table(findall) -> bytes:
    """Each code point's general category (index into GENERAL_CATEGORIES, +1)
    and, in the top bit, White_Space, as the engine behind `findall(pattern,
    text)` sees them. 0 where no category matched (a bug in the engine or in
    this list; the test checks there is none)."""
    table = bytearray(sys.maxunicode + 1)
    for i, cat in enumerate(GENERAL_CATEGORIES, 1):
        for run in findall(rf"\p{{{cat}}}+", EVERY_CHAR):
            for ch in run:
                table[ord(ch)] = i
    for run in findall(r"\s+", EVERY_CHAR):
        for ch in run:
            table[ord(ch)] |= 0x80
    return bytes(table)


def describe(code: int) -> str:
    if code & 0x7F == 0:
        return "no category"
    return GENERAL_CATEGORIES[(code & 0x7F) - 1] + (" + White_Space" if code & 0x80 else "")


@functools.lru_cache(maxsize=None)
def engine_tables() -> tuple[bytes, bytes]:
    return engine_table(regex.findall), engine_table(lambda pattern, text: bpe.pretokenize(text, pattern))


@functools.lru_cache(maxsize=None)
def unicode_version_differences() -> frozenset:
    """The characters whose category or White_Space differs between `regex`'s
    Unicode tables and regex-syntax's: the only ones where splits may differ."""
    py, rust = engine_tables()
    return frozenset(chr(c) for c in range(len(py)) if py[c] != rust[c])


def test_every_character_has_one_category_in_each_engine():
    # The derived set is only as good as the tables: every code point but the
    # surrogates must fall in exactly one category in both engines.
    py, rust = engine_tables()
    for name, table in (("regex", py), ("regex-syntax", rust)):
        missing = [c for c in range(len(table)) if table[c] & 0x7F == 0 and not 0xD800 <= c < 0xE000]
        assert not missing, f"{name}: no general category for U+{missing[0]:04X} ({len(missing)} such)"


# The contexts a character is tried in: alone, inside and around lower- and
# upper-case letters (GPT-4o's pattern tells Ll from Lu/Lo: "\u0295Ab" is one
# chunk where U+0295 is Lo, two where it is Ll), digits, spaces, a contraction
# and line ends, so that each alternative of the three patterns sees it. One
# probe per character, probes joined in blocks.
def probe(c: str) -> str:
    return f" {c}x{c}{c}1 {c}'S\t{c}\n{c}Ab A{c}b {c}"


@pytest.mark.parametrize("name", NAMES)
def test_engines_differ_only_by_unicode_version(name):
    """Every code point is tried in the contexts of `probe`, with both engines;
    where the splits differ, the character must be one whose category the two
    engines' Unicode tables disagree on. Everything else must split alike."""
    py, rust = engine_tables()
    diff = unicode_version_differences()
    pattern = TIKTOKEN_PATTERNS[name]
    chars = [c for c in EVERY_CHAR if c not in diff]
    unexplained = []
    for i in range(0, len(chars), 4096):
        block = chars[i : i + 4096]
        text = "".join(map(probe, block))
        if bpe.pretokenize(text, name) == regex.findall(pattern, text):
            continue
        # Find the characters responsible, one probe at a time.
        for c in block:
            theirs, ours = regex.findall(pattern, probe(c)), bpe.pretokenize(probe(c), name)
            if theirs != ours:
                unexplained.append(f"U+{ord(c):04X} ({describe(py[ord(c)])} in both): "
                                   f"regex {theirs!r}, bpe {ours!r}")
        if not unexplained:
            unexplained.append(f"a block from U+{ord(block[0]):04X} splits differently, but no probe alone does")
    assert not unexplained, (f"{len(unexplained)} characters split differently although both engines "
                             "give them the same Unicode category:\n" + "\n".join(unexplained[:20]))


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
    if "\U000323b0" in unicode_version_differences():  # `regex` is at Unicode 17 or later
        assert regex.findall(bpe.GPT4_PATTERN, text) == ["\U000323b0", ":"]  # a letter, then punctuation
    else:  # both engines' tables know it (or neither does): they agree
        assert regex.findall(bpe.GPT4_PATTERN, text) == bpe.pretokenize(text, "gpt4")
    assert bpe.pretokenize(text, "gpt4") == ["\U000323b0:"]  # unassigned to Rust: one punctuation run
    assert tiktoken_chunks_equal(text, ["\U000323b0:"], bpe.GPT4_PATTERN)


def test_lone_surrogates_are_refused_clearly():
    # A str with a lone surrogate has no UTF-8 form, so Rust cannot see it;
    # Python's UnicodeEncodeError (a ValueError) says so. (encode() replaces
    # them with U+FFFD first, as tiktoken does.)
    with pytest.raises(UnicodeEncodeError):
        bpe.pretokenize("a\ud800b")
