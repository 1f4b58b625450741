"""Split patterns: the built-in names and checking a custom regex.

A pattern is the regex that cuts text into chunks before BPE (merges never
cross a chunk boundary). The three built-ins are tiktoken's, character for
character; the Rust core holds them (``rust/split/patterns.rs``) and splits with
them, so they are written once.
"""

from __future__ import annotations

import functools
import re

from bpe import _core
from bpe._core import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN

#: Pattern names accepted wherever a pattern is (tiktoken's names as aliases).
PATTERNS = {
    "gpt2": GPT2_PATTERN,
    "r50k": GPT2_PATTERN,
    "gpt4": GPT4_PATTERN,
    "cl100k": GPT4_PATTERN,
    "gpt4o": GPT4O_PATTERN,
    "o200k": GPT4O_PATTERN,
}


def resolve_pattern(pattern: str) -> str:
    """Returns the regex for a pattern name (``"gpt4"``, ``"cl100k"``, ...) or
    checks and returns a regex given as is.

    A bare word that is not a known name is refused: ``--pattern gpt5`` is far
    more likely a typo than a regex that matches the literal text "gpt5".
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    if pattern in PATTERNS:
        return PATTERNS[pattern]
    if re.fullmatch(r"[A-Za-z0-9_]+", pattern):
        names = ", ".join(PATTERNS)
        raise ValueError(f"unknown pattern name {pattern!r}; use one of {names}, or a regex")
    _pretokenizer(pattern)  # raises ValueError on an invalid regex (and keeps it compiled)
    return pattern


def pattern_name(pattern: str) -> str | None:
    """The short name of a built-in pattern, else None."""
    return {GPT2_PATTERN: "gpt2", GPT4_PATTERN: "gpt4", GPT4O_PATTERN: "gpt4o"}.get(pattern)


@functools.lru_cache(maxsize=16)
def _pretokenizer(pattern: str) -> _core.Pretokenizer:
    # Compiled once per pattern: resolve_pattern's check and pretokenize share it.
    return _core.Pretokenizer(pattern)


def pretokenize(text: str, pattern: str = "gpt4") -> list[str]:
    """Splits ``text`` into the chunks BPE works inside: the same list as
    ``regex.findall(pattern, text)``, computed in Rust."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}" + ("; decode it first" if isinstance(text, (bytes, bytearray)) else ""))
    return _pretokenizer(resolve_pattern(pattern)).findall(text)
