"""The command line's engines: ``--engine ray`` for `bpe count`, `bpe train`
and `bpe encode` (``bpe/distributed/ray.py``), and sharded output
(``--format shards``: ``bpe/distributed/local.py``), which `bpe encode --engine ray`
always writes and `--engine local` (the default) writes when asked, byte for
byte the same.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from bpe.cli import arguments
from bpe.cli.io import STDIN, CommandLineError, inputs, report_warnings, source_options, special_policy
from bpe._util.files import UsageError
from bpe.distributed.plan import SHARD_BYTES

ENGINES = ("local", "ray")


def add_engine_args(p: argparse.ArgumentParser, *, encode: bool = False) -> None:
    p.add_argument("--engine", choices=ENGINES, default="local",
                   help="local: this process, all cores (default); ray: shards on a Ray cluster "
                        "(pip install 'bpe[ray]'), the same result byte for byte")
    p.add_argument("--address", metavar="ADDR",
                   help="with --engine ray: the cluster to join: auto (the one `ray start` runs on this machine) "
                        "or ray://HOST:10001 (default: start a local Ray)")
    p.add_argument("--workers", type=arguments.at_least_1, metavar="N",
                   help="with --engine ray: tasks at once (default: every CPU of the cluster; a local Ray gets N CPUs)")
    p.add_argument("--shard-size", type=arguments.byte_size, metavar="SIZE",
                   help="plain-text files larger than this are cut into pieces of about this size at points "
                        "no chunk crosses (default 64M, 2**26 bytes)")
    if encode:
        p.add_argument("--resume", action="store_true",
                       help="sharded output: keep the shards a previous run completed (same input and tokenizer, "
                            "checksum intact) and encode only the rest")


def check_engine(args: argparse.Namespace) -> bool:
    """True for --engine ray; --address and --workers only go with it."""
    if args.engine != "ray" and (args.address is not None or args.workers is not None):
        raise CommandLineError("--address and --workers go with --engine ray")
    if args.engine != "ray" and args.shard_size is not None and getattr(args, "format", None) != "shards":
        raise CommandLineError("--shard-size goes with --engine ray (or encode's --format shards)")
    if args.shard_size is None:
        args.shard_size = SHARD_BYTES
    return args.engine == "ray"


def _files(args) -> list[str]:
    files = inputs(args.files, source_options(args), streams=False)
    if STDIN in args.files:
        raise CommandLineError("--engine ray reads files on every node: save standard input to a file first")
    return files


def count(args: argparse.Namespace):
    """`bpe count --engine ray`: the Counts (saved by the caller)."""
    from bpe import distributed

    options = source_options(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counts = distributed.count(_files(args), address=args.address, num_workers=args.workers,
                                   pattern=args.pattern or "gpt4", max_memory=args.max_memory,
                                   progress=False if args.quiet else None, text_field=options.text_field,
                                   skip_bad=options.skip_bad, shard_size=args.shard_size,
                                   input_format=options.input_format)
    report_warnings(caught)
    return counts


def train(args: argparse.Namespace, vocab_size: int, specials: list[str]):
    """`bpe train --engine ray`: the Tokenizer of ``vocab_size`` (the largest of
    --vocab; the caller cuts the others from it and writes them)."""
    from bpe import distributed

    if args.from_counts:
        raise CommandLineError("--from-counts trains from a table, which needs no cluster; leave out --engine ray")
    options = source_options(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = distributed.train(_files(args), vocab_size, address=args.address, num_workers=args.workers,
                                pattern=args.pattern or "gpt4", special_tokens=specials,
                                progress=False if args.quiet else None, text_field=options.text_field,
                                skip_bad=options.skip_bad, max_memory=args.max_memory,
                                min_frequency=args.min_frequency, shard_size=args.shard_size,
                                input_format=options.input_format)
    report_warnings(caught)
    return tok


def encode(args: argparse.Namespace, tok) -> None:
    """`bpe encode --engine ray`, or `--format shards`: OUT/shard-NNNNN.bin + manifest.json."""
    if args.output is None:
        raise CommandLineError("sharded output is a directory: give --out DIR")
    if args.text is not None:
        raise CommandLineError("sharded output is made from files; save --text to a file first")
    if args.val_fraction is not None:
        raise CommandLineError("sharded output has no train/val split (`bpe gpt train` takes the last 10% of its "
                               "tokens for validation); leave out --val-fraction")
    options = source_options(args)
    common = dict(resume=args.resume, shard_size=args.shard_size, text_field=options.text_field,
                  skip_bad=options.skip_bad, input_format=options.input_format, progress=False if args.quiet else None,
                  tokenizer_name=args.tokenizer, **special_policy(args))
    files = _files(args)
    if args.engine == "ray":
        from bpe import distributed

        manifest = distributed.encode(tok, files, args.output, address=args.address, num_workers=args.workers,
                                      **common)
    else:
        from bpe.distributed.local import encode_local

        manifest = encode_local(tok, files, args.output, **common)
    if manifest.get("skipped_records"):
        print(f"bpe: warning: {manifest['skipped_records']}", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {args.output}: {len(manifest['shards'])} shards, {manifest['tokens']:,} tokens, "
              f"{manifest['documents']:,} documents, {manifest['dtype']}", file=sys.stderr)


def check_resume(args: argparse.Namespace, sharded: bool) -> None:
    if args.resume and not sharded:
        raise UsageError("--resume finishes sharded output (--engine ray, or --format shards)")
