"""The `bpe` command line: train, encode, decode, info, and gpt (train/sample).

Errors a user can cause (a missing file, a bad --vocab, an unwritable output)
end with a one-line message and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from decimal import Decimal
from pathlib import Path

from bpe import gpt_cli
from bpe.files import UsageError, check_output_file, check_readable_file, check_text_file, read_text
from bpe.patterns import PATTERNS, pattern_name
from bpe.tokenizer import Tokenizer


_UNITS = {"": 1, "k": 1000, "m": 1000**2, "ki": 1024, "mi": 1024**2}


def parse_size(text: str) -> int:
    """'50k' -> 50000, '32Ki' -> 32768, '50000' -> 50000, '1.5k' -> 1500."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]i?)?\s*", text.replace("_", "").replace(",", ""))
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write e.g. 50000, 50k or 32Ki")
    # Decimal, not float: 1.001 * 1000 must be exactly 1001.
    value = Decimal(m.group(1)) * _UNITS[(m.group(2) or "").lower()]
    if value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens")
    return int(value)


def _load(path: str) -> Tokenizer:
    check_readable_file(path)
    return Tokenizer.load(path)


def cmd_train(args: argparse.Namespace) -> None:
    files = [check_text_file(f) for f in args.files]
    check_output_file(args.output)
    specials = [] if args.no_special else (args.special or ["<|endoftext|>"])
    progress = None if not args.quiet else False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = Tokenizer.train(
            [Path(f) for f in files],
            args.vocab,
            pattern=args.pattern,
            special_tokens=specials,
            progress=progress,
        )
    for w in caught:  # one line each, not Python's file:line: UserWarning form
        print(f"bpe: warning: {w.message}", file=sys.stderr)
    tok.save(args.output)
    if not args.quiet:
        print(f"wrote {args.output}: {tok.n_vocab} tokens ({len(tok.merges)} merges, "
              f"{len(tok.special_tokens)} special), pattern {pattern_name(tok.pattern) or 'custom'}",
              file=sys.stderr)


def cmd_encode(args: argparse.Namespace) -> None:
    if args.out is None:
        if args.val_fraction is not None:
            raise UsageError("--val-fraction splits a dataset; it needs --out DIR")
        _encode_to_stdout(args)
        return
    from bpe.data import write_dataset

    if args.val_fraction is not None and not 0 <= args.val_fraction < 1:
        raise UsageError(f"--val-fraction must be at least 0 and below 1, got {args.val_fraction}")
    meta = write_dataset(
        args.files,
        args.tokenizer,
        args.out,
        val_fraction=0.1 if args.val_fraction is None else args.val_fraction,
        allow_special=args.allow_special,
    )
    s = meta["splits"]
    print(f"wrote {args.out}: train.bin {s['train']['tokens']:,} tokens ({s['train']['bytes']:,} bytes), "
          f"val.bin {s['val']['tokens']:,} tokens ({s['val']['bytes']:,} bytes), {meta['dtype']}", file=sys.stderr)


def _encode_to_stdout(args: argparse.Namespace) -> None:
    tok = _load(args.tokenizer)
    files = [check_text_file(f) for f in args.files]
    # Read and encode every file before printing anything: a bad second file
    # gives one error line, not half an output.
    lines = []
    for f in files:
        text = read_text(f)
        ids = tok.encode(text, allowed_special="all" if args.allow_special else (),
                         disallowed_special=())
        lines.append(" ".join(map(str, ids)))
    sys.stdout.write("\n".join(lines) + "\n")


def cmd_decode(args: argparse.Namespace) -> None:
    tok = _load(args.tokenizer)
    raw = read_text(check_text_file(args.file)) if args.file and args.file != "-" else sys.stdin.read()
    try:
        ids = [int(x) for x in raw.split()]
    except ValueError as e:
        raise UsageError(f"the input must be whitespace-separated token ids ({e})") from None
    sys.stdout.write(tok.decode(ids))


def cmd_info(args: argparse.Namespace) -> None:
    tok = _load(args.tokenizer)
    # Read FILE before printing anything: a bad FILE gives one error line only.
    text = read_text(check_text_file(args.file)) if args.file else None
    print(f"file:            {args.tokenizer}")
    print(f"vocab size:      {tok.n_vocab}")
    print(f"merges:          {len(tok.merges)}")
    print(f"pattern:         {pattern_name(tok.pattern) or 'custom'}: {tok.pattern}")
    specials = ", ".join(f"{t} = {i}" for t, i in tok.special_tokens.items()) or "none"
    print(f"special tokens:  {specials}")
    longest = max(tok.vocab.values(), key=len)
    print(f"longest token:   {len(longest)} bytes: {longest!r}")
    if text is not None:
        n_bytes = len(text.encode("utf-8"))
        n_tokens = len(tok.encode_ordinary(text))
        ratio = n_bytes / n_tokens if n_tokens else float("nan")
        print(f"{args.file}: {n_bytes} bytes, {n_tokens} tokens, {ratio:.3f} bytes per token")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bpe", description="Byte-level BPE tokenizer: train, encode, decode.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="learn a vocabulary from UTF-8 text files")
    t.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files (each is one document)")
    t.add_argument("--vocab", required=True, type=parse_size, metavar="N",
                   help="vocabulary size, special tokens included: 50000, 50k, 32Ki")
    t.add_argument("--pattern", default="gpt4",
                   help=f"split pattern: {', '.join(PATTERNS)} or a regex (default gpt4)")
    t.add_argument("--special", action="append", metavar="TOKEN",
                   help="a special token (repeatable; default <|endoftext|>)")
    t.add_argument("--no-special", action="store_true", help="no special tokens")
    t.add_argument("-o", "--output", default="tokenizer.bpe", help="output file (default tokenizer.bpe)")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summary")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser(
        "encode",
        help="encode files to token ids: one line of ids per file on stdout, or a dataset (--out DIR)",
        description="Without --out: one line of whitespace-separated ids per file, on stdout. With --out DIR: "
        "a training dataset, DIR/train.bin and DIR/val.bin (flat little-endian uint16 ids, uint32 for "
        "vocabularies over 65,536 tokens, <|endoftext|> between files) and DIR/meta.json; streamed, "
        "encoded on all cores.",
    )
    e.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files (each is one document)")
    e.add_argument("-t", "--tokenizer", required=True, metavar="TOK")
    e.add_argument("--out", metavar="DIR", help="write a dataset (train.bin, val.bin, meta.json) to DIR")
    e.add_argument("--val-fraction", type=float, default=None, metavar="F",
                   help="with --out: the last F of each file goes to val.bin (default 0.1)")
    e.add_argument("--allow-special", action="store_true",
                   help="encode special-token text as special tokens (default: as text)")
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser("decode", help="decode whitespace-separated ids (FILE or stdin) to text")
    d.add_argument("file", nargs="?", metavar="FILE")
    d.add_argument("-t", "--tokenizer", required=True, metavar="TOK")
    d.set_defaults(func=cmd_decode)

    i = sub.add_parser("info", help="describe a tokenizer; with FILE, its bytes per token")
    i.add_argument("file", nargs="?", metavar="FILE")
    i.add_argument("-t", "--tokenizer", required=True, metavar="TOK")
    i.set_defaults(func=cmd_info)

    gpt_cli.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except KeyboardInterrupt:
        print("bpe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `bpe encode ... | head`: the reader left; not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        print("bpe: error: out of memory", file=sys.stderr)
        return 1
    except (UsageError, OSError, ValueError, TypeError, OverflowError, RuntimeError) as e:
        # RuntimeError: an internal error of the Rust core (its message says so).
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OSError) and e.filename and e.filename not in msg:
            msg = f"{e.filename}: {msg}"
        print(f"bpe: error: {msg}", file=sys.stderr)
        return 1
    return 0
