"""`bpe info`: what a tokenizer is, and with FILEs, how many tokens they take."""

from __future__ import annotations

import argparse
import os

from bpe._util.patterns import pattern_name
from bpe.cli import arguments
from bpe.cli.io import STDIN, Bar, inputs, is_stream, load_tokenizer, report_skipped, source_options, special_lists, total_bytes
from bpe.sources import paths as sources

__all__ = ["add_parser", "cmd_info"]


def add_parser(sub) -> None:
    """Adds info to the `bpe` command's subparsers."""
    i = sub.add_parser("info", help="describe a tokenizer; with FILEs, their tokens and bytes per token",
                       description="Describe a tokenizer; with FILEs, count their tokens (streamed).")
    i.add_argument("files", nargs="*", metavar="FILE",
                   help="files to count: text, JSON Lines, Parquet, compressed or not; directories; globs; - for stdin")
    arguments.tokenizer_arg(i)
    arguments.special_args(i)
    arguments.source_args(i)
    arguments.common_args(i, threads=True, force=False)
    i.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> None:
    from bpe.data import streams

    tok = load_tokenizer(args.tokenizer)
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
    if tok.picky is not None:
        removals = sum(len(e) == 1 for e in tok.picky.events)
        print(f"events:          {len(tok.picky.events) - removals} merges, {removals} removals (Picky BPE)")
        prune = "" if tok.picky.prune is None else f" (prune={tok.picky.prune:g})"
        print(f"pruned:          {len(tok.removed_tokens)} tokens removed{prune}")
    else:
        try:
            merges = f"{len(tok.merges)}"
        except ValueError:  # ranks that are not all merges (encoding works all the same)
            merges = "none (a rank vocabulary whose tokens are not all merges)"
        print(f"merges:          {merges}")
    if tok.superbpe is None:
        print(f"pattern:         {pattern_name(tok.pattern) or 'custom'}: {tok.pattern}")
    else:
        stage1, end = tok.superbpe, max(tok.vocab) + 1
        print(f"SuperBPE:        stage 1 ids 0-{stage1.transition - 1} (subwords), stage 2 ids "
              f"{stage1.transition}-{end - 1} (superwords, {end - stage1.transition} tokens)")
        print(f"pattern:         stage 1 {pattern_name(stage1.pattern) or 'custom'}: {stage1.pattern}")
        print(f"                 stage 2 (encoding) superbpe: {tok.pattern}")
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
