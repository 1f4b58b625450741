"""The tokenizer file: one versioned, checksummed text file (docs/formats.md#the-tokenizer-file-bpe).

    bpe-tokenizer v1
    pattern "<the split regex, as JSON>"
    superbpe TRANSITION "<stage-1 regex, as JSON>"   (SuperBPE only)
    special_tokens N
    "<text as JSON>" ID            (N lines)
    merges M                       or: ranks M              or: events M [prune P]
    LEFT RIGHT                     or: BASE64-TOKEN RANK    or: LEFT RIGHT / remove ID   (M lines)
    sha256 <hex digest of everything above>

Also the ``.tiktoken`` rank lines (``BASE64-TOKEN RANK``), which the ranks
section shares with tiktoken's files. Only text is handled here, and reading
a file's bytes (``read_file``, so that every failure names the file): the
Tokenizer builds itself from what ``parse`` returns and checks the content.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from typing import NamedTuple, Sequence

FILE_MAGIC = "bpe-tokenizer"
FILE_VERSION = 1


class TokenizerFileError(ValueError):
    """A tokenizer file is missing, unreadable, truncated, corrupted, or of an
    unknown format/version."""


# A file that cannot be read raises a TokenizerFileError that is also the
# OSError open() raised, so code written for open's errors (`except
# FileNotFoundError:` around a load, to train when there is no file yet) still
# works, and `except TokenizerFileError` (or ValueError) catches every failure.
class TokenizerFileNotFoundError(TokenizerFileError, FileNotFoundError):
    """No file at that path."""


class TokenizerFileIsADirectoryError(TokenizerFileError, IsADirectoryError):
    """The path is a directory."""


class TokenizerFilePermissionError(TokenizerFileError, PermissionError):
    """The file may not be read."""


class TokenizerFileOSError(TokenizerFileError, OSError):
    """Any other failure to read the file."""


def read_file(path, what: str = "tokenizer file", inside: str | None = None) -> tuple[bytes, str]:
    """The bytes of the file at ``path``, and its name for messages. Any
    failure to read it raises a ``TokenizerFileError`` in one line: the file,
    what is wrong, how to fix it. ``what`` names the kind of file, and
    ``inside`` the file that a directory given in its place usually holds."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"the path of the {what} must be a str or os.PathLike, not {type(path).__name__}")
    name = os.fsdecode(path)
    try:
        with open(path, "rb") as f:
            return f.read(), name
    except OSError as e:
        raise unreadable(e, name, what, inside) from None


def unreadable(e: OSError, name: str, what: str, inside: str | None) -> TokenizerFileError:
    if isinstance(e, FileNotFoundError):
        where = "" if os.path.isabs(name) else f" (relative to the working directory {os.getcwd()})"
        error: TokenizerFileError = TokenizerFileNotFoundError(f"{name}: no such file{where}; check the path")
    elif isinstance(e, IsADirectoryError):
        guess = os.path.join(name, inside) if inside else None
        fix = f"did you mean {guess}?" if guess and os.path.isfile(guess) else "give the path of the file"
        error = TokenizerFileIsADirectoryError(f"{name} is a directory, not a {what}; {fix}")
    elif isinstance(e, PermissionError):
        error = TokenizerFilePermissionError(f"{name}: permission denied; make the file readable (chmod u+r {name})")
    else:
        error = TokenizerFileOSError(f"{name}: cannot read the {what}: {e.strerror or e}")
    # open()'s errno, for code that looks at it; no filename, which would
    # make str(error) OSError's "[Errno 2] ..." instead of our message.
    error.errno = e.errno
    return error


class Parsed(NamedTuple):
    """What a tokenizer file holds: merges, or ranks (tiktoken-style), or a
    Picky BPE vocabulary's ``(events, prune)``."""

    pattern: str
    special_tokens: dict[str, int]
    merges: Sequence[tuple[int, int]]
    ranks: dict[bytes, int] | None
    #: SuperBPE's first stage: (transition, stage-1 pattern), else None.
    superbpe: tuple[int, str] | None = None
    picky: tuple[list[tuple[int, ...]], float | None] | None = None


def dumps(
    pattern: str,
    special_tokens: dict[str, int],
    *,
    merges: Sequence[tuple[int, int]] | None = None,
    vocab: dict[int, bytes] | None = None,
    superbpe: tuple[int, str] | None = None,
    picky: tuple | None = None,
) -> str:
    """The file's text: with ``merges`` (a byte-level vocabulary replayed from
    the 256 bytes), ``picky`` (a Picky BPE vocabulary's ``(events, prune)``:
    merges ``LEFT RIGHT`` and removals ``remove ID`` in training ids, see
    bpe/_tokenizer/picky.py) or else the ranks of ``vocab`` (ids that need
    not follow that layout, as tiktoken's). ``superbpe``: a SuperBPE
    vocabulary's first stage, ``(transition, stage-1 pattern)``; ``pattern``
    is then the second stage's."""
    lines = [
        f"{FILE_MAGIC} v{FILE_VERSION}",
        f"pattern {json.dumps(pattern)}",
        *([f"superbpe {superbpe[0]} {json.dumps(superbpe[1])}"] if superbpe is not None else []),
        f"special_tokens {len(special_tokens)}",
        *(f"{json.dumps(t)} {i}" for t, i in special_tokens.items()),
    ]
    if picky is not None:
        events, prune = picky
        header = f"events {len(events)}" + ("" if prune is None else f" prune {float(prune)!r}")
        lines += [header, *(f"{e[0]} {e[1]}" if len(e) == 2 else f"remove {e[0]}" for e in events)]
    elif merges is not None:
        lines += [f"merges {len(merges)}", *(f"{l} {r}" for (l, r) in merges)]
    else:
        assert vocab is not None
        lines += [f"ranks {len(vocab)}", *tiktoken_lines(vocab)]
    body = "\n".join(lines) + "\n"
    return body + f"sha256 {hashlib.sha256(body.encode('utf-8')).hexdigest()}\n"


def parse(raw: bytes, name: str) -> Parsed:
    """The content of a file's bytes; ``TokenizerFileError`` naming ``name``
    for anything that is not an intact file of this version."""

    def fail(why: str) -> TokenizerFileError:
        return TokenizerFileError(f"{name}: {why}")

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("not a bpe tokenizer file (not UTF-8 text)") from None
    if text.startswith(FILE_MAGIC) and "\r\n" in text[:64]:
        # Windows line endings, as git's autocrlf leaves a checked-out file.
        # Tokens are base64 and the format has no other CR, so undoing the
        # conversion is exact; the checksum below still verifies the result.
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines[0].startswith(FILE_MAGIC + " v"):
        raise fail(f"not a bpe tokenizer file (it does not start with '{FILE_MAGIC} v{FILE_VERSION}')")
    if lines[0] != f"{FILE_MAGIC} v{FILE_VERSION}":
        raise fail(
            f"unsupported format version {lines[0][len(FILE_MAGIC) + 1:]!r}; this bpe "
            f"reads v{FILE_VERSION} (upgrade bpe to read newer files)"
        )
    # The checksum line closes the file: without it the file is truncated.
    if len(lines) < 2 or lines[-1] != "" or not lines[-2].startswith("sha256 "):
        raise fail("truncated (the closing sha256 line is missing)")
    body = "\n".join(lines[:-2]) + "\n"
    if hashlib.sha256(body.encode("utf-8")).hexdigest() != lines[-2][len("sha256 "):]:
        raise fail("corrupted (its sha256 checksum does not match its content)")
    try:
        it = iter(lines[1:-2])
        key, _, value = next(it).partition(" ")
        if key != "pattern":
            raise ValueError("expected the 'pattern' line")
        pattern = json.loads(value)
        key, _, value = next(it).partition(" ")
        superbpe = None
        if key == "superbpe":  # optional: SuperBPE's first stage
            transition, _, stage1 = value.partition(" ")
            superbpe = (count(transition), json.loads(stage1))
            if not isinstance(superbpe[1], str):
                raise ValueError("the superbpe line's pattern is not a string")
            key, _, value = next(it).partition(" ")
        if key != "special_tokens":
            raise ValueError("expected the 'special_tokens' line")
        specials = {}
        for _ in range(count(value)):
            tok_json, _, i = next(it).rpartition(" ")
            special = json.loads(tok_json)
            if not isinstance(special, str) or special in specials:
                raise ValueError(f"special token {special!r} is not a str or appears twice")
            specials[special] = count(i)
        key, _, value = next(it).partition(" ")
        ranks: dict[bytes, int] | None
        picky = None
        if key == "events":
            n, *rest = value.split(" ")
            prune = None
            if rest:
                if len(rest) != 2 or rest[0] != "prune":
                    raise ValueError(f"the events line ends in {' '.join(rest)[:40]!r}, not 'prune P'")
                prune = float(rest[1])
            events: list[tuple[int, ...]] = []
            for _ in range(count(n)):
                l, r = next(it).split(" ")
                events.append((count(r),) if l == "remove" else (count(l), count(r)))
            merges, ranks, picky = [], None, (events, prune)
        elif key == "merges":
            merges = []
            for _ in range(count(value)):
                l, r = next(it).split(" ")
                merges.append((count(l), count(r)))
            ranks = None
        elif key == "ranks":
            merges = []
            n = count(value)
            # A list, not a generator: a StopIteration inside a generator
            # becomes a RuntimeError (found by tests/test_reliability.py).
            ranks = parse_tiktoken_lines([next(it) for _ in range(n)], name="the ranks section", blank_ok=False)
            if len(ranks) != n:  # pragma: no cover - blank lines are refused above
                raise ValueError(f"the ranks section announces {n} tokens but holds {len(ranks)}")
        else:
            raise ValueError("expected the 'merges', 'ranks' or 'events' line")
        if next(it, None) is not None:
            raise ValueError("unexpected lines after the vocabulary")
        if superbpe is not None and ranks is not None:
            raise ValueError("a SuperBPE vocabulary is stored as merges, not ranks")
        return Parsed(pattern, specials, merges, ranks, superbpe, picky)
    except StopIteration:
        raise fail("truncated (fewer lines than its header announces)") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        raise fail(f"corrupted: {e}") from None


def tiktoken_lines(vocab: dict[int, bytes]) -> list[str]:
    """``BASE64-TOKEN RANK`` lines, in id order (a ``.tiktoken`` file's body)."""
    return [f"{base64.b64encode(vocab[i]).decode('ascii')} {i}" for i in sorted(vocab)]


def parse_tiktoken_lines(lines, name: str = "ranks", blank_ok: bool = True) -> dict[bytes, int]:
    """``{token bytes: rank}`` from ``BASE64-TOKEN RANK`` lines (str or bytes)."""
    ranks: dict[bytes, int] = {}
    first_line: dict[bytes, int] = {}
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("ascii", "replace")
        if not line.strip() and blank_ok:
            continue
        try:
            token, rank = line.split()
            token_bytes = base64.b64decode(token, validate=True)
            rank = count(rank)
        except (ValueError, binascii.Error):
            raise ValueError(f"{name}: line {n} is not 'base64-token rank': {line[:80]!r}") from None
        if token_bytes in ranks:
            raise ValueError(
                f"{name}: line {n}: token {token_bytes!r} appears twice (first on line {first_line[token_bytes]}); "
                f"every token's bytes must be unique"
            )
        ranks[token_bytes] = rank
        first_line[token_bytes] = n
    return ranks


def count(text: str) -> int:
    """A non-negative int written as this module writes it (no sign, no
    spaces, no leading zeros, ASCII digits only)."""
    if not re.fullmatch(r"0|[1-9][0-9]{0,18}", text):
        raise ValueError(f"{text[:40]!r} is not a non-negative integer")
    return int(text)
