"""The `bpe` command line: train, count, encode, decode, info, gpt (train/sample), and
compare, show, audit, serve (bpe/cli_see.py); `--engine ray` and sharded output are in
bpe/cli_ray.py.

Conventions, the same for every command:
- ``-t/--tokenizer`` takes a ``.bpe`` file, a ``.tiktoken`` file, a
  ``tokenizer.json`` or a name (``gpt2``, ``r50k``, ``cl100k``, ``o200k``): see ``bpe/named.py``.
- ``-`` is standard input wherever a FILE is taken; ``-o/--output`` names
  what a command writes (standard output when it is absent, for commands
  that print). Files are written atomically; see ``bpe/files.py`` for what
  is refused (devices, read-only files without ``--force``).
- Encoding and decoding stream: memory stays bounded whatever the input's
  size (``bpe/streams.py``).
- An error is one line on stderr: ``bpe: error: ...`` and exit status 1 for
  a problem with the input or the files, ``bpe COMMAND: error: ...`` and
  exit status 2 for a command line that cannot be understood. Never a
  traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from decimal import Decimal
from pathlib import Path

from bpe import cli_pipeline, cli_ray, cli_see, gpt_cli, sources
from bpe.cli_io import (
    STDIN,
    Bar,
    CommandLineError,
    StdinAsFile,
    inputs,
    is_stream,
    report_skipped,
    source_options,
    special_lists,
    special_policy,
    total_bytes,
    write_output,
)
from bpe.files import UsageError, check_output_file, check_readable_file
from bpe.patterns import PATTERNS, pattern_name
from bpe.tokenizer import Tokenizer

_UNITS = {"": 1, "k": 1000, "m": 1000**2, "ki": 1024, "mi": 1024**2}

#: What `-o FILE` writes by the file's extension, when --format is not given
#: (any other name is a dataset directory).
FORMAT_BY_EXTENSION = {".npy": "numpy", ".jsonl": "json", ".json": "json", ".txt": "ids", ".ids": "ids"}


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


def _load(spec: str) -> Tokenizer:
    from bpe.named import load_tokenizer

    return load_tokenizer(spec)


# -- train ------------------------------------------------------------------------


def cmd_train(args: argparse.Namespace) -> None:
    if args.no_special and args.special:
        raise CommandLineError("--special and --no-special contradict each other; give one")
    _check_from_counts(args)
    cli_pipeline.check_base_args(args)
    ray = cli_ray.check_engine(args)
    if ray and args.base is not None:
        raise CommandLineError("--base extends a vocabulary in one process; leave out --engine ray")
    options = source_options(args)
    files = inputs(args.files, options, streams=False)
    outputs = cli_pipeline.train_outputs(args)
    base = None if args.base is None else _load(args.base)
    specials = None if base else [] if args.no_special else (args.special or ["<|endoftext|>"])
    progress = None if not args.quiet else False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Several sizes: one training to the largest, the others cut from it
        # (each the tokenizer training that size gives: bpe/extend.py).
        if ray:
            tok = cli_ray.train(args, max(args.vocab), specials)
        elif args.from_counts:
            tok = Tokenizer.train_from_counts(args.from_counts, max(args.vocab), special_tokens=specials,
                                              min_frequency=args.min_frequency, progress=progress)
        else:
            tok = Tokenizer.train(
                [Path(f) for f in files],
                max(args.vocab),
                base=base,
                pattern=args.pattern or "gpt4",
                special_tokens=specials,
                progress=progress,
                text_field=options.text_field,
                skip_bad=options.skip_bad,
                max_memory=args.max_memory,
                min_frequency=args.min_frequency,
            )
    for w in caught:  # one line each, not Python's file:line: UserWarning form
        print(f"bpe: warning: {w.message}", file=sys.stderr)
    toks = [tok._resized(v, base, specials) for v in args.vocab]
    cli_pipeline.write_tokenizers(toks, outputs, args.force)
    for tok, (_, path) in zip(toks, outputs):
        if not args.quiet:
            merges = f"{len(tok.merges)} merges" if tok._from_merges else f"{len(tok.vocab)} ranks"
            print(f"wrote {path}: {tok.n_vocab} tokens ({merges}, "
                  f"{len(tok.special_tokens)} special), pattern {pattern_name(tok.pattern) or 'custom'}",
                  file=sys.stderr)


def _check_from_counts(args: argparse.Namespace) -> None:
    """FILEs or --from-counts TABLE, and what each goes with."""
    if args.from_counts is None:
        if not args.files:
            raise CommandLineError("give FILEs to train on (- for standard input), or --from-counts TABLE")
        return
    if args.files:
        raise CommandLineError("give FILEs or --from-counts, not both (merge count tables with `bpe count --merge`)")
    if args.pattern is not None:
        raise CommandLineError("--pattern comes from the count table with --from-counts; leave it out")
    if args.max_memory is not None:
        raise CommandLineError("--max-memory caps counting, and --from-counts counts nothing; leave it out")
    check_readable_file(args.from_counts)


# -- count ------------------------------------------------------------------------


def cmd_count(args: argparse.Namespace) -> None:
    from bpe.counts import Counts, count

    check_output_file(args.output, force=args.force)
    ray = cli_ray.check_engine(args)
    if args.merge:
        if args.pattern is not None or args.max_memory is not None or ray:
            raise CommandLineError("--merge merges count tables as they are; leave out --pattern, --max-memory "
                                   "and --engine ray")
        entries, total = Counts.merge_files(args.files, args.output, force=args.force)
        pattern = None
    elif ray:
        counts = cli_ray.count(args)
        (entries, total), pattern = counts.save(args.output, force=args.force), counts.pattern
    else:
        options = source_options(args)
        files = inputs(args.files, options, streams=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counts = count([Path(f) for f in files], pattern=args.pattern or "gpt4", max_memory=args.max_memory,
                           progress=False if args.quiet else None, text_field=options.text_field,
                           skip_bad=options.skip_bad)
        for w in caught:
            print(f"bpe: warning: {w.message}", file=sys.stderr)
        (entries, total), pattern = counts.save(args.output, force=args.force), counts.pattern
    if not args.quiet:
        named = "" if pattern is None else f", pattern {pattern_name(pattern) or 'custom'}"
        print(f"wrote {args.output}: {entries:,} distinct chunks, {total:,} in all{named}", file=sys.stderr)


def _memory(text: str) -> int:
    """--max-memory: '2G', '512M', bytes (powers of 1024)."""
    from bpe.counts import parse_memory

    try:
        return parse_memory(text, "--max-memory")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _at_least_1(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _count_args(p: argparse.ArgumentParser) -> None:
    """--max-memory (counting): for `train` and `count`."""
    p.add_argument("--max-memory", type=_memory, metavar="SIZE",
                   help="cap on the counting maps, e.g. 2G or 512M (powers of 1024): past it, counts spill "
                        "to sorted files in TMPDIR, merged exactly at the end (default: no cap)")


# -- encode -----------------------------------------------------------------------


def _encode_format(args) -> str:
    if args.format:
        return args.format
    if args.output is None:
        return "ids"
    return FORMAT_BY_EXTENSION.get(os.path.splitext(args.output)[1].lower(), "dataset")


def cmd_encode(args: argparse.Namespace) -> None:
    from bpe import streams

    ray = cli_ray.check_engine(args)
    if ray and args.format not in (None, "shards"):
        raise CommandLineError("--engine ray writes sharded output (--format shards); leave out --format")
    fmt = "shards" if ray else _encode_format(args)
    cli_ray.check_resume(args, fmt == "shards")
    if args.text is not None and args.files:
        raise CommandLineError("give FILEs or --text, not both")
    if args.text is None and not args.files:
        raise CommandLineError("give FILEs to encode (- for standard input), or --text")
    cli_pipeline.check_dropout_args(args)
    if fmt == "shards":
        if args.dropout is not None:
            raise CommandLineError("--dropout writes ids, .npy or a dataset; sharded output has no dropout")
        return cli_ray.encode(args, _load(args.tokenizer))
    if args.dropout is not None and fmt != "dataset":
        tok = _load(args.tokenizer)
        if args.output is not None:
            check_output_file(args.output, force=args.force)
        return cli_pipeline.encode_dropout(tok, args, fmt, special_policy(args), write_output)
    if fmt == "dataset":
        if args.output is None:
            raise CommandLineError("--format dataset writes a directory: give -o DIR")
        return _encode_dataset(args)
    if args.val_fraction is not None:
        raise CommandLineError("--val-fraction splits a dataset; it needs -o DIR (and no --format)")
    if fmt == "numpy" and args.output is None and not _seekable(sys.stdout):
        raise CommandLineError("--format numpy needs a file to write (its header is completed at the end): give -o FILE.npy")
    tok = _load(args.tokenizer)
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

    from bpe import streams

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
    from bpe.data import write_dataset

    if args.text is not None or STDIN in args.files:
        raise CommandLineError("a dataset is made from files (each split by its size): save standard input or --text to a file first")
    if args.val_fraction is not None and not 0 <= args.val_fraction < 1:
        raise UsageError(f"--val-fraction must be at least 0 and below 1, got {args.val_fraction}")
    options = source_options(args)
    files = inputs(args.files, options, streams=False)
    if any(sources.kind(f, options) != "text" or sources.compressed(f) for f in files):
        raise CommandLineError("a dataset (-o DIR) is split by bytes of plain text files; for records (JSON Lines, "
                               "Parquet) or compressed files write --format numpy, or decompress first")
    tok = _load(args.tokenizer)
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


# -- decode -----------------------------------------------------------------------


def _decode_dtype(args) -> str | None:
    """How FILE holds its ids: a dtype (binary), "npy", or None (text)."""
    if args.dtype:
        return args.dtype
    path = args.file
    if path.endswith(".npy"):
        return "npy"
    if path.endswith(".bin"):
        from bpe.data import META

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
    from bpe import streams

    if args.file != STDIN:
        check_readable_file(args.file)
    dtype = _decode_dtype(args)
    tok = _load(args.tokenizer)
    errors = "bytes" if args.bytes else args.errors
    if args.output is not None:
        check_output_file(args.output, force=args.force)
    write_output(args.output, args.force, lambda fd: streams.decode_to_fd(tok, args.file, fd, dtype=dtype, errors=errors))


# -- info -------------------------------------------------------------------------


def cmd_info(args: argparse.Namespace) -> None:
    from bpe import streams

    tok = _load(args.tokenizer)
    options = source_options(args)
    paths = inputs(args.files, options)
    counted = streams.Encoded()
    if paths:
        # Count first, print after: a bad FILE gives one error line only.
        allowed, disallowed = special_lists(tok, args)
        with Bar("counting", total_bytes(paths), args.quiet) as progress:
            counted = streams.count_tokens(tok, paths, options=options, allowed_special=allowed,
                                           disallowed_special=disallowed, num_threads=args.threads,
                                           progress=progress)
    counts = counted.ids
    print(f"tokenizer:       {args.tokenizer}")
    print(f"vocab size:      {tok.n_vocab}")
    try:
        merges = f"{len(tok.merges)}"
    except ValueError:  # ranks that are not all merges (encoding works all the same)
        merges = "none (a rank vocabulary whose tokens are not all merges)"
    print(f"merges:          {merges}")
    print(f"pattern:         {pattern_name(tok.pattern) or 'custom'}: {tok.pattern}")
    specials = ", ".join(f"{t} = {i}" for t, i in tok.special_tokens.items()) or "none"
    print(f"special tokens:  {specials}")
    longest = max(tok.vocab.values(), key=len)
    print(f"longest token:   {len(longest)} bytes: {longest!r}")
    # Bytes per token only where the bytes are the text's own (not records
    # in JSON, not compressed).
    sizes = [None if p == STDIN or is_stream(p) or sources.kind(p, options) != "text" or sources.compressed(p)
             else os.path.getsize(p) for p in paths]
    for path, n_bytes, n_tokens, n_docs in zip(paths, sizes, counts, counted.documents):
        name = "<stdin>" if path == STDIN else path
        if sources.kind(path, options) != "text":
            print(f"{name}: {n_docs:,} record{'s' if n_docs != 1 else ''}, {n_tokens:,} tokens")
        elif n_bytes is None:
            print(f"{name}: {n_tokens:,} tokens")
        else:
            ratio = f"{n_bytes / n_tokens:.3f}" if n_tokens else "-"
            print(f"{name}: {n_bytes:,} bytes, {n_tokens:,} tokens, {ratio} bytes per token")
    if len(paths) > 1 and None not in sizes:
        b, t = sum(sizes), sum(counts)
        print(f"total: {b:,} bytes, {t:,} tokens, {b / t:.3f} bytes per token" if t else f"total: {b:,} bytes, 0 tokens")
    elif len(paths) > 1:
        print(f"total: {sum(counted.documents):,} documents, {sum(counts):,} tokens")
    report_skipped(counted.skipped)


# -- the parser -------------------------------------------------------------------


def version() -> str:
    from importlib import metadata

    import bpe

    try:
        installed = metadata.version("bpe")
    except metadata.PackageNotFoundError:
        installed = bpe.__version__
    return f"bpe {installed} (Python {sys.version.split()[0]})"


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line under the command that was
    given (``bpe encode: error: ...``), and a pointer to ``--help``."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _tokenizer_arg(p: argparse.ArgumentParser, help: str = "the tokenizer") -> None:
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK",
                   help=f"{help}: a .bpe file, a .tiktoken file, a tokenizer.json, or a name "
                        f"(gpt2, r50k, cl100k, o200k)")


def _special_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--allow-special", action="store_true",
                   help="encode special-token text (e.g. <|endoftext|>) as the special token")
    g.add_argument("--special-as-text", action="store_true",
                   help="encode special-token text as ordinary text (default: such text is an error)")


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text-field", default="text", metavar="FIELD",
                   help="JSON Lines and Parquet: the field (column) that holds the text; a.b for a nested one "
                        "(default text)")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip bad records (no such field, not a string, not JSON, not UTF-8), count them and "
                        "report the count, instead of stopping at the first")
    p.add_argument("--input-format", choices=sources.FORMATS, default="auto",
                   help="how to read FILEs: by their names (auto: .jsonl/.ndjson/.json, .parquet, else text; "
                        "after .gz/.zst/.xz/.bz2), or all as this (for stdin, which is text unless told)")


def _common_args(p: argparse.ArgumentParser, *, threads: bool = False, force: bool = True) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary on stderr")
    if force:
        p.add_argument("--force", action="store_true", help="replace a read-only output file")
    if threads:
        p.add_argument("--threads", type=int, default=0, metavar="N", help="threads to use (default: all cores)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bpe", description="Byte-level BPE tokenizer: train, encode, decode.")
    p.add_argument("--version", action="version", version=version(), help="show the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    t = sub.add_parser("train", help="learn a vocabulary from UTF-8 text files",
                       description="Learn a byte-level BPE vocabulary from UTF-8 text files (each one document).")
    t.add_argument("files", nargs="*", metavar="FILE",
                   help="corpus files: UTF-8 text (one document each), JSON Lines or Parquet (one per record), "
                        "compressed or not; directories; globs; - for standard input")
    t.add_argument("--vocab", required=True, type=lambda v: cli_pipeline.parse_sizes(v, parse_size), metavar="N",
                   help="vocabulary size, special tokens included: 50000, 50k, 32Ki; several sizes from one "
                        "training: 8k,32k,50k (then -o must hold {vocab})")
    t.add_argument("--base", metavar="TOK",
                   help="extend this tokenizer (a file or a name such as cl100k): keep its ids and merges, "
                        "learn only new merges, up to --vocab tokens in all")
    t.add_argument("--pattern",
                   help=f"split pattern: {', '.join(PATTERNS)} or a regex (default gpt4)")
    t.add_argument("--from-counts", metavar="TABLE",
                   help="train from a count table (.bpec, from `bpe count`) instead of FILEs; its pattern is used")
    _count_args(t)
    cli_ray.add_engine_args(t)
    t.add_argument("--min-frequency", type=_at_least_1, metavar="N",
                   help="leave out chunks seen fewer than N times in all (less memory for the merge loop; "
                        "default: keep every chunk)")
    t.add_argument("--special", action="append", metavar="TOKEN",
                   help="a special token (repeatable; default <|endoftext|>)")
    t.add_argument("--no-special", action="store_true", help="no special tokens")
    t.add_argument("-o", "--output", default="tokenizer.bpe", metavar="FILE",
                   help="the tokenizer file to write (default tokenizer.bpe)")
    _source_args(t)
    _common_args(t)
    t.set_defaults(func=cmd_train)

    c = sub.add_parser(
        "count",
        help="count the chunks of a corpus into a count table (.bpec), or merge count tables",
        description="Count the distinct pre-tokenized chunks of a corpus (files as for train) into a "
        "count table, the whole input of training: count shards apart, merge their tables with --merge, "
        "and `bpe train --from-counts` gives the tokenizer training on all shards at once would.",
    )
    c.add_argument("files", nargs="+", metavar="FILE",
                   help="corpus files as for train (text, JSON Lines, Parquet, compressed; directories; globs; "
                        "- for standard input); with --merge, count tables")
    c.add_argument("--merge", action="store_true", help="FILEs are count tables (.bpec): merge them into one")
    c.add_argument("--pattern", help=f"split pattern: {', '.join(PATTERNS)} or a regex (default gpt4)")
    _count_args(c)
    cli_ray.add_engine_args(c)
    c.add_argument("-o", "--output", required=True, metavar="FILE", help="the count table to write (.bpec)")
    _source_args(c)
    _common_args(c)
    c.set_defaults(func=cmd_count)

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
    _tokenizer_arg(e)
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
    _special_args(e)
    _source_args(e)
    cli_ray.add_engine_args(e, encode=True)
    _common_args(e, threads=True)
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser(
        "decode",
        help="decode token ids (text, .bin or .npy) to text",
        description="Decode token ids to text, streamed in bounded memory. FILE holds ids as text (numbers "
        "separated by spaces, commas or brackets: what `bpe encode` prints), a dataset's .bin (its dtype from "
        "meta.json beside it, or --dtype) or a .npy array.",
    )
    d.add_argument("file", nargs="?", default=STDIN, metavar="FILE", help="the ids (default: standard input)")
    _tokenizer_arg(d)
    d.add_argument("-o", "--output", metavar="FILE", help="write the text here instead of standard output")
    d.add_argument("--dtype", choices=("uint16", "uint32", "int32", "int64", "uint64"),
                   help="FILE is binary ids of this type (a .bin without meta.json, or any name)")
    d.add_argument("--errors", choices=("strict", "replace"), default="replace",
                   help="bytes that are not UTF-8 (ids cut mid-character): an error, or U+FFFD (default replace)")
    d.add_argument("--bytes", action="store_true", help="write the raw bytes, UTF-8 or not")
    _common_args(d)
    d.set_defaults(func=cmd_decode)

    i = sub.add_parser("info", help="describe a tokenizer; with FILEs, their tokens and bytes per token",
                       description="Describe a tokenizer; with FILEs, count their tokens (streamed).")
    i.add_argument("files", nargs="*", metavar="FILE",
                   help="files to count: text, JSON Lines, Parquet, compressed or not; directories; globs; - for stdin")
    _tokenizer_arg(i)
    _special_args(i)
    _source_args(i)
    _common_args(i, threads=True, force=False)
    i.set_defaults(func=cmd_info)

    gpt_cli.add_parser(sub)
    cli_see.add_parser(sub)
    return p


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command that was given (`bpe encode`, `bpe gpt
    train`), so that its errors show under its name, not the top level's."""
    command = parser._subparsers._group_actions[0].choices[args.command]  # noqa: SLF001
    sub = getattr(args, "gpt_command", None)
    return command._subparsers._group_actions[0].choices[sub] if sub else command  # noqa: SLF001


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with StdinAsFile(args, needs_file=args.func in (cmd_train, cmd_count)):
            args.func(args)
    except CommandLineError as e:
        _command_parser(parser, args).error(str(e))
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
    except (UsageError, OSError, ValueError, TypeError, OverflowError, RuntimeError, ImportError) as e:
        # RuntimeError: an internal error of the Rust core (its message says so).
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OSError) and e.filename and e.strerror:
            # "out.bpe: No space left on device", not "[Errno 28] No space ...: 'out.bpe'".
            msg = f"{e.filename}: {e.strerror}"
        elif isinstance(e, OSError) and e.filename and e.filename not in msg:
            msg = f"{e.filename}: {msg}"
        print(f"bpe: error: {msg}", file=sys.stderr)
        return 1
    return 0
