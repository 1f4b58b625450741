"""Helpers shared by the benchmark driver (run.py) and its child processes
(_worker.py): the split pattern, and the ways a corpus is cut into pieces.

Every tool must see the same pieces, so the cutting lives here, in one place,
and is deterministic.
"""

from __future__ import annotations

import re

# tiktoken's cl100k_base pat_str, character for character (bpe.GPT4_PATTERN;
# run.py checks that the two agree). Anchors get it as a string so that they
# do not need to import bpe.
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

ENDOFTEXT = "<|endoftext|>"

# Ways of feeding an in-memory corpus to a trainer that takes an iterator of
# strings (rustbpe, bpeasy). Concatenated, the pieces are always the corpus.
FEEDS = ("lines", "paragraphs", "pieces")


# A single newline between two non-space characters: no chunk of the GPT-2,
# GPT-4 or GPT-4o split pattern spans it, and a text that ends there splits
# its last chunk the same way as the whole text does, so texts cut there
# encode to exactly the ids of the whole text. (A cut after "\n\n" or " \n"
# is not safe for GPT-2's pattern: at the end of a text its `\s+(?!\S)`
# takes the whole space run, in the whole text all but the last character.)
# Python's \s takes in a few more characters than Rust's (U+001C-U+001F),
# which only means fewer cuts.
_SAFE_CUT = re.compile(r"(?<=\S)\n(?=\S)")


def cut_at_newlines(text: str, target_chars: int) -> list[str]:
    """Pieces of about ``target_chars`` characters (at least), each ending
    just after a newline between two non-space characters; the last one
    ends where the text does."""
    pieces = []
    start, n = 0, len(text)
    while start < n:
        m = _SAFE_CUT.search(text, start + target_chars) if start + target_chars < n else None
        end = n if m is None else m.start() + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def split_feed(text: str, feed: str) -> list[str]:
    """The corpus as a list of strings, for one of FEEDS.

    lines:      one item per line, newline kept (what file iteration gives)
    paragraphs: split after each blank line ("\\n\\n"), separators kept
    pieces:     about 1 MB each, cut just after a newline
    """
    if feed == "lines":
        return text.splitlines(keepends=True)
    if feed == "paragraphs":
        parts = text.split("\n\n")
        return [p + "\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    if feed == "pieces":
        return cut_at_newlines(text, 1 << 20)
    raise ValueError(f"unknown feed {feed!r}; use one of {FEEDS}")


def batch_docs(text: str, n_docs: int = 1000) -> list[str]:
    """The corpus as about ``n_docs`` documents cut at line boundaries, for
    the batch-encoding measurement."""
    return cut_at_newlines(text, max(1, len(text) // n_docs))


def short_strings(text: str, n: int = 100_000, max_bytes: int = 64) -> list[str]:
    """Up to ``n`` short strings: the corpus's non-empty lines (newline
    dropped), each cut to at most ``max_bytes`` UTF-8 bytes at a character
    boundary."""
    out = []
    for line in text.splitlines():
        if not line:
            continue
        b = line.encode("utf-8")
        if len(b) > max_bytes:
            # Dropping a partial trailing character: decode with "ignore".
            line = b[:max_bytes].decode("utf-8", "ignore")
        out.append(line)
        if len(out) == n:
            break
    return out
