"""Token budgets: cut text to at most N tokens (``truncate``), or into pieces
of at most N tokens each (``chunk``), always at a character boundary.

BPE is not prefix-stable: the ids of a prefix are not always a prefix of the
ids of the text. A cut inside a word re-encodes differently (" hello" may be
one token where " hel" is two), and a cut can even change how the text before
it splits into chunks (a run of spaces before a word is split differently
from a run of spaces at the end). So nothing here trusts the ids of the whole
text for a prefix: every answer is checked by encoding the prefix itself.

The ids of the text only say *where to look*. Chunk boundaries are token
boundaries, and a prefix's chunks are the text's chunks except its last one
(the split regexes look ahead only at the end of a match: a prefix can only
end its last chunk early, or let it swallow the chunk before, as a run of
spaces does). So the prefix text[:k] has the text's tokens before its last
chunk plus those of that chunk, and the longest prefix with at most N tokens
lies between two chunks before the end of token N and one chunk past the end
of token N+1. Inside a chunk the count is not monotone (" hel" two tokens,
" hell" one, " hello" one), so every character boundary of that window is a
candidate, tried from the longest; each is counted as the tokens before the
window plus the window's own (a short encode), and the first that fits is
confirmed by encoding the whole prefix. Where that confirmation fails (a
custom pattern the argument does not cover), the fallback steps back a token
at a time to a prefix that fits, which always ends (the empty prefix fits).

Only a window of the text is encoded, grown until it holds N+2 tokens, so
truncating a long document costs about the part kept; ``chunk`` does the same
from each piece's start. tests/test_budgets.py compares ``truncate`` with its
definition (every prefix encoded) on random text.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Collection, Dict, Literal, Protocol, Union

from bpe.sources.corpus import replace_surrogates
from bpe._util.patterns import pretokenize

Specials = Union[Literal["all"], Collection[str]]
# {"allowed_special": ..., "disallowed_special": ...}, passed on to encode().
Options = Dict[str, Specials]


class _Encoder(Protocol):
    """What the budgets need of a tokenizer (this module cannot import
    bpe.tokenizer, which imports it)."""

    def encode(self, text: str, *, allowed_special: Specials = ...,
               disallowed_special: Specials = ...) -> list[int]: ...

    def decode_bytes(self, ids: list[int]) -> bytes: ...

    def token_bytes(self, id: int) -> bytes: ...

    def _allowed(self, allowed_special: Specials) -> set[str]: ...

    def _check_disallowed(self, text: str, allowed: set[str], disallowed_special: Specials) -> None: ...

    pattern: str


#: How far past token n+1 a prefix ending inside one long chunk is tried.
LONG_CHUNK = 64


def check_max_tokens(max_tokens: object, name: str = "max_tokens") -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"{name} must be an int (the number of tokens), not {type(max_tokens).__name__}")
    if max_tokens < 1:
        raise ValueError(f"{name} must be at least 1, got {max_tokens}")
    return max_tokens


def _char_index(data: bytes, end: int) -> int:
    """How many whole characters the UTF-8 ``data[:end]`` holds: a byte
    offset rounded down to a character boundary, as a ``str`` index.
    ("surrogatepass": a lone surrogate, which encode() reads as U+FFFD,
    takes 3 bytes as U+FFFD does, so offsets still line up.)"""
    dec = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    return len(dec.decode(data[:end], final=False))


def _char_index_up(data: bytes, end: int) -> int:
    """As :func:`_char_index`, rounded up: a character split at ``end`` counts."""
    dec = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    k = len(dec.decode(data[:end], final=False))
    return k + 1 if dec.getstate()[0] else k


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class Budgets:
    """Mixed into :class:`bpe.Tokenizer`."""

    def truncate(
        self: _Encoder,
        text: str,
        max_tokens: int,
        *,
        allowed_special: Specials = frozenset(),
        disallowed_special: Specials = "all",
    ) -> str:
        """The longest prefix of ``text``, cut at a character boundary, that
        encodes (with these special-token rules, as :meth:`encode`) to at
        most ``max_tokens`` tokens. ``text`` itself if it fits."""
        max_tokens = check_max_tokens(max_tokens)
        specials = _checked(self, text, allowed_special, disallowed_special)
        return text[: _piece(self, text, 0, max_tokens, specials)]

    def chunk(
        self: _Encoder,
        text: str,
        max_tokens: int,
        overlap: int = 0,
        *,
        allowed_special: Specials = frozenset(),
        disallowed_special: Specials = "all",
    ) -> list[str]:
        """``text`` in pieces of at most ``max_tokens`` tokens each, cut at
        token boundaries (never inside a character). With ``overlap=0`` the
        pieces join back to ``text`` exactly; each piece is as long as
        :meth:`truncate` makes it. With ``overlap=k`` (``0 <= k <
        max_tokens``) each piece after the first starts at the start of the
        last ``k`` tokens of the piece before it (rounded forward to a
        character boundary): consecutive pieces share that text, at most
        those ``k`` tokens' bytes (fewer tokens where sharing ``k`` would
        leave the next piece no room to reach past this one). A
        character that alone needs more than ``max_tokens`` tokens (an emoji
        of 4 byte tokens, with max_tokens=3) cannot be cut: ``ValueError``.
        """
        return [text[a:b] for a, b in chunk_spans(self, text, max_tokens, overlap, allowed_special,
                                                 disallowed_special)]


def _checked(tok: _Encoder, text: object, allowed_special: Specials, disallowed_special: Specials) -> Options:
    """The special-token options, once ``text`` is known to be a str with no
    disallowed special token anywhere (as ``encode(text)`` would check; a
    scan in the core, not an encoding, since only part of it may be encoded)."""
    if not isinstance(text, str):
        hint = "; decode it first (e.g. text.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"text must be a str, not {type(text).__name__}{hint}")
    tok._check_disallowed(text, tok._allowed(allowed_special), disallowed_special)
    return {"allowed_special": allowed_special, "disallowed_special": disallowed_special}


def _count(tok: _Encoder, text: str, specials: Options) -> int:
    return len(tok.encode(text, **specials))


def _fit(tok: _Encoder, text: str, ids: list[int], n: int, specials: Options, complete: bool = True) -> int | None:
    """The largest k with ``len(encode(text[:k])) <= n``, given the ids of
    ``text`` (more than n of them); see the module docstring. ``complete``:
    ``text`` is the whole text; else a window of it, and None where the
    window is too small to tell."""
    data = _utf8(text)
    ends = list(accumulate(len(tok.token_bytes(i)) for i in ids[: n + 1]))  # byte ends of tokens 1..n+1
    cut = _char_index(data, ends[n - 1])  # the end of token n, rounded down
    after = _char_index_up(data, ends[n])  # the end of token n+1, rounded up
    bounds = _chunk_bounds(tok, text, after, specials, complete)
    if bounds is None:
        return None
    # The window: from two chunks before the cut (a prefix's last chunk may
    # swallow the chunk before it: "a   b" cut after the spaces) to one
    # chunk past token n+1 (a chunk may re-encode to fewer tokens as it grows:
    # " hel" is two tokens where " hell" is one).
    i = bisect_left(bounds, cut)  # bounds[i - 1] < cut <= bounds[i]
    lo = bounds[max(0, i - 2)]
    j = bisect_left(bounds, after)
    # (A very long chunk, a run of letters with no space, is tried only
    # LONG_CHUNK characters past token n+1: each candidate there costs an
    # encode of the chunk, and no longer prefix was ever seen to fit.)
    hi = min(bounds[min(len(bounds) - 1, j + 1)], after + LONG_CHUNK)
    # Counting a candidate: the tokens before the window (a chunk boundary
    # that every prefix in the window keeps) plus those of the window's part.
    base = bounds[max(0, i - 3)]
    before = bisect_right(ends, len(_utf8(text[:base])))
    for k in range(hi, lo - 1, -1):
        if before + _count(tok, text[base:k], specials) <= n:
            if _count(tok, text[:k], specials) <= n:  # checked whole: never trust the shortcut alone
                return k
            break  # the shortcut was wrong for this pattern: search the slow way
    # Fallback (no prefix in the window fits, or the shortcut was wrong):
    # step back a token at a time to a prefix that fits (the empty one
    # does), then take the longest that fits between it and the window.
    for m in range(n - 1, -1, -1):
        k0 = _char_index(data, ends[m - 1]) if m else 0
        if _count(tok, text[:k0], specials) <= n:
            for k in range(lo - 1, k0, -1):
                if _count(tok, text[:k], specials) <= n:
                    return k
            return k0
    return 0  # pragma: no cover - m = 0 gives k0 = 0, which always fits


def _chunk_bounds(tok: _Encoder, text: str, past: int, specials: Options, complete: bool) -> list[int] | None:
    """Chunk boundaries of ``text`` (character indices, 0 first), at least
    two of them past ``past`` or up to the end of the text: the ends of the
    chunks the pattern splits it into, between the special tokens it may
    hold (each its own piece). Split on a prefix whose last chunk (which the
    rest of the text could change) is dropped. ``complete``: ``text`` is
    the whole text, not a window of it, whose end is then a boundary too;
    for a window too small to hold two boundaries past ``past``, None (or
    its end, where the window reaches LONG_CHUNK past ``past``)."""
    size = max(past + 64, 2 * past)
    while True:
        end = min(len(text), size)
        bounds = [0]
        for seg_start, seg_end, special in _segments(tok, text[:end], specials):
            k = seg_start
            if not special:
                for chunk in pretokenize(replace_surrogates(text[seg_start:seg_end]), tok.pattern):
                    k += len(chunk)
                    bounds.append(k)
            if k != seg_end:  # a special token, or a custom pattern that skips characters
                bounds.append(seg_end)
        whole = complete and end == len(text)
        if not whole:
            bounds.pop()  # the last chunk of a prefix may not be the text's
        if whole or sum(b > past for b in bounds) >= 2:
            return sorted(set(bounds))
        if end == len(text):
            if len(text) > past + LONG_CHUNK:
                # A long chunk runs on past the window: the search stops at
                # LONG_CHUNK past `past` anyway, which this end stands for.
                return sorted(set(bounds)) + [len(text)]
            return None
        size *= 2


def _segments(tok: _Encoder, text: str, specials: Options) -> list[tuple[int, int, bool]]:
    """The spans of ``text`` between and of the allowed special tokens in
    it, each with whether it is a special token."""
    allowed = tok._allowed(specials["allowed_special"])
    if not allowed:
        return [(0, len(text), False)]
    spans: list[tuple[int, int, bool]] = []
    at = 0
    # Longest first: where one special token starts another, the longer wins
    # (the encoding's choice; a wrong guess only widens the search).
    for m in re.finditer("|".join(map(re.escape, sorted(allowed, key=len, reverse=True))), text):
        spans += [(at, m.start(), False), (m.start(), m.end(), True)]
        at = m.end()
    return spans + [(at, len(text), False)]


def chunk_spans(tok: _Encoder, text: str, max_tokens: int, overlap: int, allowed_special: Specials,
                disallowed_special: Specials) -> list[tuple[int, int]]:
    """The ``(start, end)`` character spans of :meth:`Budgets.chunk`'s pieces."""
    max_tokens = check_max_tokens(max_tokens)
    if isinstance(overlap, bool) or not isinstance(overlap, int):
        raise TypeError(f"overlap must be an int (a number of tokens), not {type(overlap).__name__}")
    if not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must be at least 0 and less than max_tokens ({max_tokens}), got {overlap}")
    specials = _checked(tok, text, allowed_special, disallowed_special)
    ends: dict[int, int] = {}  # piece start -> piece end

    def piece_end(start: int) -> int:
        if start not in ends:
            ends[start] = start + _piece(tok, text, start, max_tokens, specials)
        return ends[start]

    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = piece_end(start)
        if end == start:
            char = text[start]
            raise ValueError(
                f"max_tokens={max_tokens} is too small: the character {char!r} at index {start} alone "
                f"encodes to {_count(tok, char, specials)} tokens, and pieces are never cut inside a character"
            )
        spans.append((start, end))
        if end == len(text):
            break
        next_start = end
        if overlap:
            # The next piece starts at the start of the last `overlap` tokens
            # of this one, or of fewer, if from there it could not reach past
            # this piece's end (a character too big to join it).
            piece = text[start:end]
            pids = tok.encode(piece, **specials)
            data = _utf8(piece)
            for o in range(min(overlap, len(pids) - 1), 0, -1):
                # Rounded up: the shared text is at most those tokens' bytes.
                c = start + _char_index_up(data, len(tok.decode_bytes(pids[: len(pids) - o])))
                if start < c and piece_end(c) > end:
                    next_start = c
                    break
        start = next_start
    return spans


def _piece(tok: _Encoder, text: str, start: int, n: int, specials: Options) -> int:
    """The length of the longest piece of ``text`` from ``start`` that
    encodes to at most n tokens (:func:`_fit`, on a window of the text:
    truncating a long document costs about the prefix kept, not the document)."""
    # A window of the rest big enough to hold n + 2 tokens (token n+1 must
    # not be cut by the window's end), not the whole rest: each piece costs
    # about its own length.
    window = 8 * n + 64
    while True:
        part = text[start : start + window]
        at_end = start + window >= len(text)
        ids = tok.encode(part, **specials)
        if at_end and len(ids) <= n:  # the rest fits
            return len(part)
        if at_end or len(ids) > n + 1:
            k = _fit(tok, part, ids, n, specials, complete=at_end)
            if k is not None:
                return k
        window *= 2
