"""The command line's pipeline options (bpe/cli/main.py calls these):
``bpe train --vocab 8k,32k -o 'tok-{vocab}.bpe'`` (several sizes from one
training), ``bpe train --base cl100k`` (extend a vocabulary) and
``bpe encode --dropout P --seed S`` (BPE-dropout).
"""

from __future__ import annotations

import json
import os

from bpe.sources import paths as sources

from bpe.data import streams
from bpe.cli.io import STDIN, CommandLineError
from bpe._util.files import UsageError, atomic_write, check_output_file

def train_outputs(args) -> list[tuple[int, str]]:
    """The files ``bpe train`` writes: one per size, ``{vocab}`` in -o
    standing for the size (required with several sizes)."""
    sizes = args.vocab
    if len(set(sizes)) != len(sizes):
        raise CommandLineError(f"--vocab lists a size twice: {','.join(map(str, sizes))}")
    if len(sizes) > 1 and "{vocab}" not in args.output:
        raise CommandLineError("several --vocab sizes write several files: put {vocab} in -o, "
                               "e.g. -o 'tok-{vocab}.bpe'")
    outputs = [(v, args.output.replace("{vocab}", str(v))) for v in sizes]
    for _, path in outputs:
        check_output_file(path, force=args.force)
    return outputs


def write_tokenizers(toks, outputs, force: bool) -> None:
    for tok, (_, path) in zip(toks, outputs):
        atomic_write(path, lambda f, tok=tok: f.write(tok._dumps().encode("utf-8")), force=force)


def check_base_args(args) -> None:
    if args.base is None:
        return
    if args.from_counts:
        raise CommandLineError("--base trains on FILEs; it does not take --from-counts")
    if args.special or args.no_special:
        raise CommandLineError("--base keeps the base's special tokens; leave out --special and --no-special")


# -- encode --dropout -----------------------------------------------------------


def check_dropout_args(args) -> None:
    if args.dropout is None:
        if args.seed is not None:
            raise CommandLineError("--seed goes with --dropout")
        return
    if not 0 <= args.dropout < 1:
        raise UsageError(f"--dropout must be at least 0 and below 1, got {args.dropout}")


def encode_dropout(tok, args, fmt: str, policy: dict, write_output) -> None:
    """``bpe encode --dropout``: each text file (or --text) read whole and
    encoded with dropout on one thread (the slow path; see bpe/_tokenizer/dropout.py).
    With --seed S, document k (from 0) gets seed S + k: a run is repeatable,
    and each document's ids depend on its own seed only."""
    seed = args.seed
    if args.text is not None:
        texts = [args.text]
    else:
        files = sources.expand(args.files)
        if STDIN in files or any(sources.kind(f, sources.SourceOptions()) != "text" or sources.compressed(f)
                                 for f in files):
            raise CommandLineError("--dropout reads plain UTF-8 text files (or --text), not standard input, "
                                   "records or compressed files")
        texts = []
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                texts.append(fh.read())
    try:
        docs = [tok.encode(t, dropout=args.dropout, seed=None if seed is None else seed + k, **policy)
                for k, t in enumerate(texts)]
    except ValueError as e:
        if "disallowed" not in str(e):
            raise
        raise UsageError(f"{str(e).splitlines()[0]} Pass --allow-special or --special-as-text") from None
    if fmt == "numpy":
        eot = tok.special_tokens.get("<|endoftext|>")
        ids = [i for k, d in enumerate(docs) for i in ([eot] if k and eot is not None else []) + d]
        width = streams._width(tok)
        body = streams.npy_header(width, len(ids)) + b"".join(i.to_bytes(width, "little") for i in ids)
    elif fmt == "json":
        body = "".join(json.dumps(d) + "\n" for d in docs).encode()
    else:
        body = "".join(" ".join(map(str, d)) + "\n" for d in docs).encode()

    def write(fd: int) -> None:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]

    write_output(args.output, args.force, write)
