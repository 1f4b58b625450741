"""Split patterns: the built-in names, the digit rules and checking a custom regex.

A pattern cuts text into chunks before BPE (merges never cross a chunk
boundary). It is one regex (GPT-2's, GPT-4's, GPT-4o's, Llama 3's, Qwen2's:
character for character as their tokenizers have them), or a sequence of
regexes applied in turn, as HuggingFace's pre-tokenizers apply a ``Sequence``
of ``Split`` steps (DeepSeek-V3's; any pattern with a digit rule). A sequence
is stored as one string, the JSON array of its regexes, so everything that
holds a pattern (files, count tables, ``Tokenizer.pattern``) holds it
unchanged. The Rust core holds the built-in regexes (``rust/split/patterns.rs``)
and splits with them, so they are written once; docs/patterns.md cites each
source.
"""

from __future__ import annotations

import functools
import re

from bpe import _core
from bpe._core import (
    DEEPSEEK_V3_PATTERN,
    DIGITS_R2L3,
    DIGITS_SINGLE,
    GPT2_PATTERN,
    GPT4_PATTERN,
    GPT4O_PATTERN,
    LLAMA3_PATTERN,
    QWEN2_PATTERN,
)

#: Pattern names accepted wherever a pattern is (tiktoken's names as aliases).
PATTERNS = {
    "gpt2": GPT2_PATTERN,
    "r50k": GPT2_PATTERN,
    "gpt4": GPT4_PATTERN,
    "cl100k": GPT4_PATTERN,
    "gpt4o": GPT4O_PATTERN,
    "o200k": GPT4O_PATTERN,
    "llama3": LLAMA3_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "deepseek-v3": DEEPSEEK_V3_PATTERN,
}

#: Digit rules (``digits=``): the split step each puts before the pattern.
#: "single": every digit a chunk of its own; "r2l3": each run of digits cut
#: into threes counted from the right ("1234567" -> "1", "234", "567").
DIGIT_RULES = {"single": DIGITS_SINGLE, "r2l3": DIGITS_R2L3}

# Each pattern's name, the primary one (not the tiktoken alias) first.
_NAMES = {regex: name for name, regex in reversed(PATTERNS.items())}
_RULE_NAMES = {step: name for name, step in DIGIT_RULES.items()}


def resolve_pattern(pattern: str, digits: str | None = None) -> str:
    """Returns the pattern for a name (``"gpt4"``, ``"cl100k"``,
    ``"deepseek-v3"``, ...) or checks and returns a regex given as is; with
    ``digits`` (``"single"`` or ``"r2l3"``) the digit rule's step comes first.

    A bare word that is not a known name is refused: ``--pattern gpt5`` is far
    more likely a typo than a regex that matches the literal text "gpt5".
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    if digits is not None and digits not in DIGIT_RULES:
        raise ValueError(f"unknown digit rule {digits!r}; use one of {', '.join(map(repr, DIGIT_RULES))}, or None")
    if pattern in PATTERNS:
        resolved = PATTERNS[pattern]
    elif re.fullmatch(r"[A-Za-z0-9_.-]+", pattern):
        names = ", ".join(PATTERNS)
        raise ValueError(f"unknown pattern name {pattern!r}; use one of {names}, or a regex")
    else:
        resolved = _pretokenizer(pattern).pattern  # raises ValueError on an invalid regex (and keeps it compiled)
    if digits is None:
        return resolved
    # The digit rule is a first step (as HF's `Digits` pre-tokenizer comes
    # first): it must see whole runs of digits, which a pattern's own rules
    # (GPT-4's `\p{N}{1,3}`) would already have cut from the left.
    return _core.Pretokenizer.sequence([DIGIT_RULES[digits], resolved]).pattern


def pattern_name(pattern: str) -> str | None:
    """The short name of a built-in pattern ("gpt4"; "gpt4+r2l3" with a
    digit rule), else None."""
    if pattern in _NAMES:
        return _NAMES[pattern]
    steps = pattern_steps(pattern)
    if len(steps) >= 2 and steps[0] in _RULE_NAMES:
        rest = steps[1:]
        base = rest[0] if len(rest) == 1 else _core.Pretokenizer.sequence(rest).pattern
        if base in _NAMES:
            return f"{_NAMES[base]}+{_RULE_NAMES[steps[0]]}"
    return None


def pattern_steps(pattern: str) -> list[str]:
    """The regexes a pattern applies in turn (one for a single regex)."""
    if not pattern.startswith("["):
        return [pattern]
    return _pretokenizer(pattern).steps


def pattern_cuttable(pattern: str) -> bool:
    """Whether a text may be cut at the core's safe cut points and split
    piece by piece with the same chunks (files cut for parallel counting)."""
    return _pretokenizer(pattern).cuttable


@functools.lru_cache(maxsize=16)
def _pretokenizer(pattern: str) -> _core.Pretokenizer:
    # Compiled once per pattern: resolve_pattern's check and pretokenize share it.
    return _core.Pretokenizer(pattern)


def pretokenize(text: str, pattern: str = "gpt4", digits: str | None = None) -> list[str]:
    """Splits ``text`` into the chunks BPE works inside, computed in Rust: for
    one regex the same list as ``regex.findall(pattern, text)``; for a
    sequence (DeepSeek-V3's, a digit rule) each regex splits the pieces of the
    ones before it, its matches and the text between them becoming pieces."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}" + ("; decode it first" if isinstance(text, (bytes, bytearray)) else ""))
    return _pretokenizer(resolve_pattern(pattern, digits)).findall(text)
