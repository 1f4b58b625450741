"""`bpe encode` and `bpe decode`: text to ids and back, streamed in bounded
memory (``bpe/data/streams.py``), or a training dataset
(``bpe/data/dataset.py``)."""

from __future__ import annotations

import argparse
import os
import sys

from bpe._util.files import UsageError, check_output_file, check_readable_file
from bpe.cli import arguments, engines, pipeline
from bpe.cli.io import (STDIN, Bar, CommandLineError, inputs, load_tokenizer, report_skipped, source_options,
                        special_lists, special_policy, total_bytes, write_output)
from bpe.sources import paths as sources
from bpe.tokenizer import Tokenizer

__all__ = ["FORMAT_BY_EXTENSION", "add_parser", "cmd_decode", "cmd_encode"]

#: What `-o FILE` writes by the file's extension, when --format is not given
#: (any other name is a dataset directory).
FORMAT_BY_EXTENSION = {".npy": "numpy", ".jsonl": "json", ".json": "json", ".txt": "ids", ".ids": "ids"}


def add_parser(sub) -> None:
    """Adds encode and decode to the `bpe` command's subparsers."""
    e = sub.add_parser(
        "encode",
        help="encode text to token ids: lines of ids, JSON, .npy, or a training dataset",
        description="Encode UTF-8 text files (each one document), streamed in bounded memory. Formats: "
        "ids (a line of space-separated ids per file), json (a JSON array per file, one per line), numpy "
        "(one .npy array, <|endoftext|> between files), dataset (DIR/train.bin, DIR/val.bin: flat "
        "little-endian uint16 ids, uint32 past 65,536 tokens, <|endoftext|> between files; DIR/meta.json), "
        "shards (DIR/shard-NNNNN.bin + DIR/manifest.json: what --engine ray writes). "
        "Without -o: ids on standard output. With -o: the format its extension names (.npy, .jsonl/.json, "
        ".txt/.ids), else a dataset directory.",
    )
    e.add_argument("files", nargs="*", metavar="FILE",
                   help="UTF-8 text files (one document each), JSON Lines or Parquet (one per record), compressed "
                        "or not; directories; globs; - for standard input")
    arguments.tokenizer_arg(e)
    e.add_argument("--text", metavar="TEXT", help="encode this text instead of files")
    e.add_argument("-o", "--output", "--out", dest="output", metavar="PATH",
                   help="write here instead of standard output (a file, or a dataset directory)")
    e.add_argument("--format", choices=("ids", "json", "numpy", "dataset", "shards"),
                   help="what to write (default: ids; with -o, by its extension, else dataset; shards: "
                        "DIR/shard-NNNNN.bin + DIR/manifest.json, what --engine ray writes)")
    e.add_argument("--dropout", type=float, metavar="P",
                   help="BPE-dropout: skip each merge with chance P (0 <= P < 1), for training data; "
                        "text files read whole, on one thread")
    e.add_argument("--seed", type=int, metavar="S", help="with --dropout: repeatable draws (document k gets S+k)")
    e.add_argument("--val-fraction", type=float, default=None, metavar="F",
                   help="dataset only: the last F of each file goes to val.bin (default 0.1)")
    arguments.special_args(e)
    arguments.source_args(e)
    engines.add_engine_args(e, encode=True)
    arguments.common_args(e, threads=True)
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser(
        "decode",
        help="decode token ids (text, .bin or .npy) to text",
        description="Decode token ids to text, streamed in bounded memory. FILE holds ids as text (numbers "
        "separated by spaces, commas or brackets: what `bpe encode` prints), a dataset's .bin (its dtype from "
        "meta.json beside it, or --dtype) or a .npy array.",
    )
    d.add_argument("file", nargs="?", default=STDIN, metavar="FILE", help="the ids (default: standard input)")
    arguments.tokenizer_arg(d)
    d.add_argument("-o", "--output", metavar="FILE", help="write the text here instead of standard output")
    d.add_argument("--dtype", choices=("uint16", "uint32", "int32", "int64", "uint64"),
                   help="FILE is binary ids of this type (a .bin without meta.json, or any name)")
    d.add_argument("--errors", choices=("strict", "replace"), default="replace",
                   help="bytes that are not UTF-8 (ids cut mid-character): an error, or U+FFFD (default replace)")
    d.add_argument("--bytes", action="store_true", help="write the raw bytes, UTF-8 or not")
    arguments.common_args(d)
    d.set_defaults(func=cmd_decode)


def _encode_format(args) -> str:
    if args.format:
        return args.format
    if args.output is None:
        return "ids"
    return FORMAT_BY_EXTENSION.get(os.path.splitext(args.output)[1].lower(), "dataset")


def cmd_encode(args: argparse.Namespace) -> None:
    from bpe.data import streams

    ray = engines.check_engine(args)
    if ray and args.format not in (None, "shards"):
        raise CommandLineError("--engine ray writes sharded output (--format shards); leave out --format")
    fmt = "shards" if ray else _encode_format(args)
    engines.check_resume(args, fmt == "shards")
    if args.text is not None and args.files:
        raise CommandLineError("give FILEs or --text, not both")
    if args.text is None and not args.files:
        raise CommandLineError("give FILEs to encode (- for standard input), or --text")
    pipeline.check_dropout_args(args)
    if fmt == "shards":
        if args.dropout is not None:
            raise CommandLineError("--dropout writes ids, .npy or a dataset; sharded output has no dropout")
        return engines.encode(args, load_tokenizer(args.tokenizer))
    if args.dropout is not None and fmt != "dataset":
        tok = load_tokenizer(args.tokenizer)
        if args.output is not None:
            check_output_file(args.output, force=args.force)
        return pipeline.encode_dropout(tok, args, fmt, special_policy(args), write_output)
    if fmt == "dataset":
        if args.output is None:
            raise CommandLineError("--format dataset writes a directory: give -o DIR")
        return _encode_dataset(args)
    if args.val_fraction is not None:
        raise CommandLineError("--val-fraction splits a dataset; it needs -o DIR (and no --format)")
    if fmt == "numpy" and args.output is None and not _seekable(sys.stdout):
        raise CommandLineError("--format numpy needs a file to write (its header is completed at the end): give -o FILE.npy")
    tok = load_tokenizer(args.tokenizer)
    if args.output is not None:
        check_output_file(args.output, force=args.force)
    if args.text is not None:
        return _encode_text(tok, args, fmt)
    options = source_options(args)
    paths = inputs(args.files, options)
    allowed, disallowed = special_lists(tok, args)
    done = []

    def write(fd: int) -> None:
        with Bar("encoding", total_bytes(paths), args.quiet) as progress:
            done.append(streams.encode_to_fd(tok, paths, fd, fmt, options=options, allowed_special=allowed,
                                             disallowed_special=disallowed, num_threads=args.threads,
                                             progress=progress))

    write_output(args.output, args.force, write)
    report_skipped(done[0].skipped)


def _seekable(stream) -> bool:
    try:
        return os.lseek(stream.fileno(), 0, os.SEEK_CUR) >= 0 and os.path.isfile(f"/dev/fd/{stream.fileno()}")
    except (OSError, ValueError, AttributeError):
        return False


def _encode_text(tok: Tokenizer, args, fmt: str) -> None:
    import json

    from bpe.data import streams

    try:
        ids = tok.encode(args.text, **special_policy(args))
    except ValueError as e:
        if "disallowed" not in str(e):
            raise
        raise UsageError(f"{str(e).splitlines()[0]} Pass --allow-special to encode it as the special token, "
                         f"or --special-as-text to encode it as text") from None
    if fmt == "numpy":
        width = streams._width(tok)
        body = streams.npy_header(width, len(ids)) + b"".join(i.to_bytes(width, "little") for i in ids)
    elif fmt == "json":
        body = (json.dumps(ids) + "\n").encode()
    else:
        body = (" ".join(map(str, ids)) + "\n").encode()
    write_output(args.output, args.force, lambda fd: _write_all(fd, body))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _encode_dataset(args) -> None:
    from bpe.data.dataset import write_dataset

    if args.text is not None or STDIN in args.files:
        raise CommandLineError("a dataset is made from files (each split by its size): save standard input or --text to a file first")
    if args.val_fraction is not None and not 0 <= args.val_fraction < 1:
        raise UsageError(f"--val-fraction must be at least 0 and below 1, got {args.val_fraction}")
    options = source_options(args)
    files = inputs(args.files, options, streams=False)
    if any(sources.kind(f, options) != "text" or sources.compressed(f) for f in files):
        raise CommandLineError("a dataset (-o DIR) is split by bytes of plain text files; for records (JSON Lines, "
                               "Parquet) or compressed files write --format numpy, or decompress first")
    tok = load_tokenizer(args.tokenizer)
    meta = write_dataset(
        files,
        tok,
        args.output,
        val_fraction=0.1 if args.val_fraction is None else args.val_fraction,
        num_threads=args.threads,
        progress=False if args.quiet else None,
        tokenizer_name=args.tokenizer,
        force=args.force,
        dropout=args.dropout or 0.0,
        seed=args.seed,
        **special_policy(args),
    )
    s = meta["splits"]
    if not args.quiet:
        print(f"wrote {args.output}: train.bin {s['train']['tokens']:,} tokens ({s['train']['bytes']:,} bytes), "
              f"val.bin {s['val']['tokens']:,} tokens ({s['val']['bytes']:,} bytes), {meta['dtype']}",
              file=sys.stderr)


def _decode_dtype(args) -> str | None:
    """How FILE holds its ids: a dtype (binary), "npy", or None (text)."""
    if args.dtype:
        return args.dtype
    path = args.file
    if path.endswith(".npy"):
        return "npy"
    if path.endswith(".bin"):
        from bpe.data.dataset import META

        meta = os.path.join(os.path.dirname(path) or ".", META)
        if os.path.isfile(meta):
            import json

            try:
                with open(meta, encoding="utf-8") as f:
                    return json.load(f)["dtype"]
            except (OSError, ValueError, KeyError, TypeError):
                raise UsageError(f"{meta} cannot be read for the dtype of {path}; give --dtype uint16 or uint32") from None
        raise UsageError(f"{path}: a .bin file without a {META} beside it; give its --dtype (uint16 or uint32)")
    return None


def cmd_decode(args: argparse.Namespace) -> None:
    from bpe.data import streams

    if args.file != STDIN:
        check_readable_file(args.file)
    dtype = _decode_dtype(args)
    tok = load_tokenizer(args.tokenizer)
    errors = "bytes" if args.bytes else args.errors
    if args.output is not None:
        check_output_file(args.output, force=args.force)
    write_output(args.output, args.force, lambda fd: streams.decode_to_fd(tok, args.file, fd, dtype=dtype, errors=errors))
