"""What the commands of the `bpe` command line have in common: the parser
class (one-line errors), the arguments several commands take, and the
argparse types of sizes, counts and thread numbers (one syntax for every
size: ``bpe/_util/sizes.py``)."""

from __future__ import annotations

import argparse
import sys

from bpe._util.sizes import parse_bytes, parse_count
from bpe.sources import paths as sources

__all__ = ["TOKENIZER_HELP", "Parser", "at_least_1", "byte_size", "common_args", "count_args", "non_negative",
           "source_args", "special_args", "tokenizer_arg", "version", "vocab_size", "vocab_sizes"]

TOKENIZER_HELP = "a .bpe file, a .tiktoken file, a tokenizer.json, or a name (gpt2, r50k, cl100k, o200k)"


def version() -> str:
    from importlib import metadata

    import bpe

    try:
        installed = metadata.version("bpe")
    except metadata.PackageNotFoundError:
        installed = bpe.__version__
    return f"bpe {installed} (Python {sys.version.split()[0]})"


class Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line under the command that was
    given (``bpe encode: error: ...``), and a pointer to ``--help``."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


# -- types --------------------------------------------------------------------------


def byte_size(text: str) -> int:
    """A size in bytes (``--max-memory``, ``--shard-size``, ``--limit``): see
    ``bpe/_util/sizes.py``."""
    try:
        return parse_bytes(text, "size")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(text: str) -> int:
    try:
        return parse_count(text, "--vocab")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def vocab_size(text: str) -> int:
    """One vocabulary size: 180000, 180k, 32Ki (``--superbpe``)."""
    return _count(text)


def vocab_sizes(text: str) -> list[int]:
    """``--vocab``: one size (50000, 50k, 32Ki), or several separated by
    commas. Commas are thousands separators ("50,000", "1,000,000") when a
    part alone would be below 256, which no vocabulary is; else they
    separate sizes ("8k,32k,50k", "300,400,500")."""
    parts = text.split(",")
    if len(parts) == 1:
        return [_count(text)]
    if any(not p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty size; write e.g. 8k,32k,50k")
    try:
        sizes = [_count(p) for p in parts]
    except argparse.ArgumentTypeError:
        sizes = None
    if sizes is None or min(sizes) < 256:
        return [_count(text)]
    return sizes


def at_least_1(text: str) -> int:
    """A whole number of at least 1 (``--min-frequency``, ``--workers``)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def threshold(text: str) -> float:
    """A number above 0 and at most 1 (``--prune``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0 and at most 1 (e.g. 0.9)")
    return value


def non_negative(text: str) -> int:
    """A whole number of at least 0 (``--threads``: 0 is all cores)."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0: all cores)")
    return int(text)


# -- arguments several commands take --------------------------------------------------


def tokenizer_arg(p: argparse.ArgumentParser, help: str = "the tokenizer") -> None:
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK", help=f"{help}: {TOKENIZER_HELP}")


def special_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--allow-special", action="store_true",
                   help="encode special-token text (e.g. <|endoftext|>) as the special token")
    g.add_argument("--special-as-text", action="store_true",
                   help="encode special-token text as ordinary text (default: such text is an error)")


def source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text-field", default="text", metavar="FIELD",
                   help="JSON Lines and Parquet: the field (column) that holds the text; a.b for a nested one "
                        "(default text)")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip bad records (no such field, not a string, not JSON, not UTF-8), count them and "
                        "report the count, instead of stopping at the first")
    p.add_argument("--input-format", choices=sources.FORMATS, default="auto",
                   help="how to read FILEs: by their names (auto: .jsonl/.ndjson/.json, .parquet, else text; "
                        "after .gz/.zst/.xz/.bz2), or all as this (for stdin, which is text unless told)")


def common_args(p: argparse.ArgumentParser, *, threads: bool = False, force: bool = True) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary on stderr")
    if force:
        p.add_argument("--force", action="store_true", help="replace a read-only output file")
    if threads:
        p.add_argument("--threads", type=non_negative, default=0, metavar="N", help="threads to use (default: all cores)")


def count_args(p: argparse.ArgumentParser) -> None:
    """--max-memory (counting): for `train` and `count`."""
    p.add_argument("--max-memory", type=byte_size, metavar="SIZE",
                   help="cap on the counting maps, e.g. 2G or 512M (2**30, 2**20 bytes): past it, counts spill "
                        "to sorted files in TMPDIR, merged exactly at the end (default: no cap)")
