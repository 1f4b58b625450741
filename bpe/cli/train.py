"""`bpe train` and `bpe count`: learn a vocabulary from a corpus, or count
its chunks into a table (``bpe/counts.py``) to train from later."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from bpe._util.files import check_output_file, check_readable_file
from bpe._util.patterns import DIGIT_RULES, PATTERNS, pattern_name, resolve_pattern
from bpe.cli import arguments, engines, pipeline
from bpe.cli.io import CommandLineError, inputs, load_tokenizer, report_warnings, source_options
from bpe.tokenizer import Tokenizer

__all__ = ["add_parser", "cmd_count", "cmd_train"]


def add_parser(sub) -> None:
    """Adds train and count to the `bpe` command's subparsers."""
    t = sub.add_parser("train", help="learn a vocabulary from UTF-8 text files",
                       description="Learn a byte-level BPE vocabulary from UTF-8 text files (each one document).")
    t.add_argument("files", nargs="*", metavar="FILE",
                   help="corpus files: UTF-8 text (one document each), JSON Lines or Parquet (one per record), "
                        "compressed or not; directories; globs; - for standard input")
    t.add_argument("--vocab", required=True, type=arguments.vocab_sizes, metavar="N",
                   help="vocabulary size, special tokens included: 50000, 50k, 32Ki; several sizes from one "
                        "training: 8k,32k,50k (then -o must hold {vocab})")
    t.add_argument("--base", metavar="TOK",
                   help="extend this tokenizer (a file or a name such as cl100k): keep its ids and merges, "
                        "learn only new merges, up to --vocab tokens in all")
    t.add_argument("--pattern",
                   help=f"split pattern: {', '.join(PATTERNS)} or a regex (default gpt4)")
    t.add_argument("--superbpe", type=arguments.vocab_size, metavar="N",
                   help="train SuperBPE (superword tokens that cross spaces, such as ' of the'): ordinary BPE up "
                        "to N tokens, then merges across words up to --vocab (N below it: 180k for 200k)")
    _digits_arg(t)
    t.add_argument("--from-counts", metavar="TABLE",
                   help="train from a count table (.bpec, from `bpe count`) instead of FILEs; its pattern is used")
    arguments.count_args(t)
    engines.add_engine_args(t)
    t.add_argument("--min-frequency", type=arguments.at_least_1, metavar="N",
                   help="leave out chunks seen fewer than N times in all (less memory for the merge loop; "
                        "default: keep every chunk)")
    t.add_argument("--prune", type=arguments.threshold, metavar="TAU",
                   help="Picky BPE: after each merge, remove a token of the pair when the merge used up more "
                        "than TAU of its occurrences (e.g. 0.9; 1 removes nothing); see docs/pruning.md")
    t.add_argument("--special", action="append", metavar="TOKEN",
                   help="a special token (repeatable; default <|endoftext|>)")
    t.add_argument("--no-special", action="store_true", help="no special tokens")
    t.add_argument("-o", "--output", default="tokenizer.bpe", metavar="FILE",
                   help="the tokenizer file to write (default tokenizer.bpe)")
    arguments.source_args(t)
    arguments.common_args(t)
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
    _digits_arg(c)
    arguments.count_args(c)
    engines.add_engine_args(c)
    c.add_argument("-o", "--output", required=True, metavar="FILE", help="the count table to write (.bpec)")
    arguments.source_args(c)
    arguments.common_args(c)
    c.set_defaults(func=cmd_count)


def _digits_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--digits", choices=list(DIGIT_RULES),
                        help="split digits first: single (each digit a chunk) or r2l3 (runs in threes from the "
                             "right); with any --pattern")


def _fold_digits(args: argparse.Namespace) -> None:
    """--digits into --pattern: the pattern string carries the digit rule
    (as files store it), so every engine below gets one pattern."""
    if args.digits is not None:
        if getattr(args, "from_counts", None) or getattr(args, "merge", False):
            raise CommandLineError("--digits goes with --pattern: the count tables' pattern is used; leave it out")
        try:
            args.pattern = resolve_pattern(args.pattern or "gpt4", args.digits)
        except ValueError as e:
            raise CommandLineError(str(e)) from None


def cmd_train(args: argparse.Namespace) -> None:
    if args.no_special and args.special:
        raise CommandLineError("--special and --no-special contradict each other; give one")
    _check_from_counts(args)
    _fold_digits(args)
    pipeline.check_base_args(args)
    ray = engines.check_engine(args)
    if ray and args.base is not None:
        raise CommandLineError("--base extends a vocabulary in one process; leave out --engine ray")
    if args.superbpe is not None and (ray or args.base is not None or args.from_counts):
        raise CommandLineError("--superbpe trains from FILEs in one process (it counts them twice, once per stage); "
                               "leave out --engine ray, --base and --from-counts")
    if args.superbpe is not None and args.superbpe >= max(args.vocab):
        raise CommandLineError(f"--superbpe {args.superbpe} must be below --vocab {max(args.vocab)}: stage 1 "
                               "trains to it, stage 2 from it to --vocab")
    if args.prune is not None and args.prune < 1:
        why = "--base" if args.base is not None else "--engine ray" if ray else (
            "several --vocab sizes" if len(args.vocab) > 1 else None)
        if why:
            raise CommandLineError(f"--prune trains a Picky BPE vocabulary from bytes, to one size; leave out {why}")
    options = source_options(args)
    files = inputs(args.files, options, streams=False)
    outputs = pipeline.train_outputs(args)
    base = None if args.base is None else load_tokenizer(args.base)
    specials = None if base else [] if args.no_special else (args.special or ["<|endoftext|>"])
    progress = None if not args.quiet else False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Several sizes: one training to the largest, the others cut from it
        # (each the tokenizer training that size gives: bpe/_tokenizer/reshape.py).
        if ray:
            tok = engines.train(args, max(args.vocab), specials)
        elif args.from_counts:
            tok = Tokenizer.train_from_counts(args.from_counts, max(args.vocab), special_tokens=specials,
                                              min_frequency=args.min_frequency, progress=progress,
                                              prune=args.prune)
        else:
            tok = Tokenizer.train(
                [Path(f) for f in files],
                max(args.vocab),
                base=base,
                pattern=args.pattern,  # None: gpt4, or the base's
                special_tokens=specials,
                progress=progress,
                text_field=options.text_field,
                skip_bad=options.skip_bad,
                max_memory=args.max_memory,
                min_frequency=args.min_frequency,
                superbpe=args.superbpe,
                prune=args.prune,
            )
    report_warnings(caught)
    toks = [tok._resized(v, base, specials) for v in args.vocab]
    pipeline.write_tokenizers(toks, outputs, args.force)
    for tok, (_, path) in zip(toks, outputs):
        if not args.quiet:
            if tok.picky is not None:
                removed = len(tok.removed_tokens)
                merges = f"{len(tok.picky.events)} events, {removed} tokens removed"
            else:
                merges = f"{len(tok.merges)} merges" if tok._from_merges else f"{len(tok.vocab)} ranks"
            print(f"wrote {path}: {tok.n_vocab} tokens ({merges}, "
                  f"{len(tok.special_tokens)} special), pattern {_pattern_of(tok)}",
                  file=sys.stderr)


def _pattern_of(tok: Tokenizer) -> str:
    """The pattern's name, and SuperBPE's stages."""
    if tok.superbpe is None:
        return pattern_name(tok.pattern) or "custom"
    stage1 = pattern_name(tok.superbpe.pattern) or "custom"
    return f"{stage1} to id {tok.superbpe.transition}, then SuperBPE's superword pattern (SuperBPE)"


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


def cmd_count(args: argparse.Namespace) -> None:
    from bpe.counts import Counts, count

    check_output_file(args.output, force=args.force)
    _fold_digits(args)
    ray = engines.check_engine(args)
    if args.merge:
        if args.pattern is not None or args.max_memory is not None or ray:
            raise CommandLineError("--merge merges count tables as they are; leave out --pattern, --max-memory "
                                   "and --engine ray")
        entries, total = Counts.merge_files(args.files, args.output, force=args.force)
        pattern = None
    elif ray:
        counts = engines.count(args)
        (entries, total), pattern = counts.save(args.output, force=args.force), counts.pattern
    else:
        options = source_options(args)
        files = inputs(args.files, options, streams=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counts = count([Path(f) for f in files], pattern=args.pattern or "gpt4", max_memory=args.max_memory,
                           progress=False if args.quiet else None, text_field=options.text_field,
                           skip_bad=options.skip_bad)
        report_warnings(caught)
        (entries, total), pattern = counts.save(args.output, force=args.force), counts.pattern
    if not args.quiet:
        named = "" if pattern is None else f", pattern {pattern_name(pattern) or 'custom'}"
        print(f"wrote {args.output}: {entries:,} distinct chunks, {total:,} in all{named}", file=sys.stderr)
