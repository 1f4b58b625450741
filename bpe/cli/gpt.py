"""`bpe gpt train`, `bpe gpt sample`, `bpe gpt eval` and `bpe gpt compare`: the
command line of the GPT (``bpe/gpt/``). Here only the arguments are parsed;
the library does the work. torch is imported only when a command runs."""

from __future__ import annotations

import argparse
import json
import sys

from bpe.cli.arguments import TOKENIZER_HELP, at_least_1, byte_size, non_negative
from bpe.gpt.comparison import DEFAULTS as COMPARE_DEFAULTS
from bpe.gpt.train import MODEL_DEFAULTS, TRAIN_DEFAULTS

__all__ = ["add_parser", "cmd_compare", "cmd_eval", "cmd_sample", "cmd_train"]

DEVICE_HELP = "auto (cuda if available), cpu, cuda, cuda:1, ..."
# (flag, type, help) of the model and optimizer settings train and compare share.
SETTINGS = [
    ("block_size", at_least_1, "context length in tokens"),
    ("n_layer", at_least_1, "transformer blocks"),
    ("n_head", at_least_1, "attention heads"),
    ("n_embd", at_least_1, "embedding width (a multiple of --n-head)"),
    ("batch_size", at_least_1, "sequences per step"),
    ("lr", float, "peak learning rate"),
    ("min_lr", float, "final learning rate (default lr/10)"),
    ("weight_decay", float, "AdamW weight decay (matrices only)"),
    ("grad_clip", float, "clip the gradient norm to this (0: off)"),
]


def _settings_args(p: argparse.ArgumentParser, defaults: dict, extra: list) -> None:
    for name, typ, help_ in [*SETTINGS, *extra]:
        default = defaults.get(name)
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=None,
                       metavar="X" if typ is float else "N",
                       help=f"{help_} (default {default})" if default is not None else help_)


def add_parser(sub) -> None:
    """Adds `gpt train`, `gpt sample`, `gpt eval` and `gpt compare` to the
    `bpe` command's subparsers."""
    g = sub.add_parser("gpt", help="train a small GPT, sample from it, evaluate it, or compare tokenizers with it")
    gsub = g.add_subparsers(dest="gpt_command", required=True, metavar="GPT_COMMAND")

    t = gsub.add_parser(
        "train",
        help="train a GPT on DIR/train.bin (from `bpe encode ... --out DIR`)",
        description="Trains the GPT of bpe/gpt/model.py: AdamW, linear warm-up then cosine decay, gradient "
        "clipping, validation loss every --eval-interval steps (in nats/token and bits/byte), and an "
        "atomic checkpoint each time, which carries the tokenizer. CPU, or CUDA with bf16 when available.",
    )
    t.add_argument("--data", required=True, metavar="DIR",
                   help="dataset directory written by `bpe encode --out DIR`, or a sharded one (`--engine ray`, "
                        "`--format shards`: its last 10%% of tokens are the validation split)")
    t.add_argument("-t", "--tokenizer", required=True, metavar="TOK",
                   help="the tokenizer the dataset was encoded with (a file or a name, as for `bpe encode`)")
    t.add_argument("-o", "--output", "--out", dest="out", default="gpt.pt", metavar="CKPT",
                   help="checkpoint file (default gpt.pt)")
    t.add_argument("--force", action="store_true", help="replace a read-only checkpoint file")
    t.add_argument("--resume", action="store_true",
                   help="continue from --out's checkpoint (its model and settings; --steps may be raised)")
    _settings_args(t, {**MODEL_DEFAULTS, **TRAIN_DEFAULTS}, [
        ("steps", at_least_1, "optimizer steps in all"),
        ("warmup", non_negative, "steps of linear warm-up"),
        ("eval_interval", at_least_1, "steps between validation and checkpoints"),
        ("eval_iters", at_least_1, "validation batches per evaluation"),
        ("log_interval", at_least_1, "steps between progress lines"),
        ("seed", non_negative, "random seed (initialisation and batches)"),
    ])
    t.add_argument("--device", default="auto", help=DEVICE_HELP)
    t.set_defaults(func=cmd_train)

    s = gsub.add_parser("sample", help="print text sampled from a trained GPT")
    s.add_argument("--ckpt", required=True, metavar="CKPT", help="checkpoint written by `bpe gpt train`")
    s.add_argument("-t", "--tokenizer", metavar="TOK",
                   help="only for a checkpoint written before checkpoints carried their tokenizer")
    s.add_argument("--prompt", default="", help="text to continue (default: start of a document)")
    s.add_argument("--tokens", type=non_negative, default=200, metavar="N", help="tokens to generate (default 200)")
    s.add_argument("--temperature", type=float, default=0.8, help="below 1: safer, above 1: wilder (default 0.8)")
    s.add_argument("--top-k", type=at_least_1, default=None, metavar="K", help="sample among the K likeliest tokens only")
    s.add_argument("--seed", type=non_negative, default=None, help="random seed, for a reproducible sample")
    s.add_argument("--no-cache", action="store_true",
                   help="recompute the whole context at every token (slower; the same sample)")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    s.set_defaults(func=cmd_sample)

    e = gsub.add_parser(
        "eval", help="bits per byte of a checkpoint on whole text files or a dataset's split",
        description="Evaluation only: the checkpoint's model predicts every token of the text once (windows of "
        "the model's context, see docs/gpt.md), and the loss is given in bits per byte of the UTF-8 text.",
    )
    e.add_argument("files", nargs="*", metavar="FILE", help="UTF-8 text files, each a document (compressed or not)")
    e.add_argument("--ckpt", required=True, metavar="CKPT", help="checkpoint written by `bpe gpt train` or `compare --save`")
    e.add_argument("--data", metavar="DIR", help="instead of FILEs: a dataset directory (`bpe encode --out DIR`)")
    e.add_argument("--split", choices=("train", "val"), default="val", help="with --data: the split (default val)")
    e.add_argument("-t", "--tokenizer", metavar="TOK",
                   help="only for a checkpoint written before checkpoints carried their tokenizer")
    e.add_argument("--stride", type=at_least_1, metavar="N",
                   help="score N new tokens per window, each with at least context - N tokens before it "
                        "(default: the context: non-overlapping windows)")
    e.add_argument("--limit", type=byte_size, metavar="SIZE", help="read only the first SIZE bytes of each FILE")
    e.add_argument("--batch-size", type=at_least_1, default=32, metavar="N", help="windows at once (default 32)")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.add_argument("--device", default="auto", help=DEVICE_HELP)
    e.set_defaults(func=cmd_eval)

    c = gsub.add_parser(
        "compare", help="train the same GPT on each tokenizer at equal compute; report held-out bits per byte",
        description="For each TOK: encode --data and the held-out text, train the same GPT (same non-embedding "
        "size) on the same number of training bytes (--budget), and measure bits per byte on the whole held-out "
        "text. A table (bits/byte, bytes/token, fertility, Rényi efficiency, parameters, tokens, FLOPs, time), "
        "--json, and --plot (bits/byte against training bytes). docs/gpt.md has the rule and a worked example.",
    )
    c.add_argument("tokenizers", nargs="+", metavar="TOK", help=f"{TOKENIZER_HELP}; or bytes (the 256 byte tokens)")
    c.add_argument("--data", nargs="+", required=True, metavar="FILE",
                   help="UTF-8 training text files, each a document (.gz/.xz/.bz2/.zst decompressed)")
    c.add_argument("--eval", nargs="+", metavar="FILE",
                   help="held-out text files (default: the last --holdout of each --data file, not trained on)")
    c.add_argument("--budget", type=byte_size, required=True, metavar="SIZE",
                   help="training bytes each run sees: 2M (2**21), 2MB (2*10**6)")
    c.add_argument("--limit", type=byte_size, metavar="SIZE", help="read only the first SIZE bytes of each --data file")
    c.add_argument("--holdout", type=float, default=0.1, metavar="F",
                   help="without --eval: the share of each --data file held out (default 0.1)")
    c.add_argument("--seeds", type=at_least_1, default=1, metavar="N",
                   help="runs per tokenizer, seeded --seed, --seed + 1, ...: the mean and standard deviation")
    c.add_argument("--seed", type=non_negative, default=1337, metavar="N", help="the first seed (default 1337)")
    _settings_args(c, COMPARE_DEFAULTS, [
        ("warmup", float, "warm-up, as a share of each run's steps"),
    ])
    c.add_argument("--evals", type=at_least_1, default=5, metavar="N",
                   help="evaluations along each run: the points of the curve (default 5)")
    c.add_argument("--eval-stride", dest="stride", type=at_least_1, metavar="N",
                   help="evaluation windows score N new tokens each (default: the context, no overlap)")
    c.add_argument("--save", metavar="DIR", help="write each run's checkpoint to DIR/TOK-seedS.pt")
    out = c.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the result (rows, runs, curves, settings) as JSON")
    out.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    c.add_argument("--plot", metavar="FILE", help="also draw bits/byte against training bytes into FILE (needs matplotlib)")
    c.add_argument("--device", default="auto", help=DEVICE_HELP)
    c.add_argument("--threads", type=at_least_1, metavar="N",
                   help="torch's CPU threads (default: torch's choice; small models on a busy machine run faster "
                        "on fewer)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar or progress lines on stderr")
    c.add_argument("--force", action="store_true", help="replace read-only --plot or --save files")
    c.set_defaults(func=cmd_compare)


def _given(args: argparse.Namespace, names) -> dict:
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def cmd_train(args: argparse.Namespace, *, log=None, stop_after: int | None = None) -> dict:
    """`bpe gpt train`."""
    from bpe.gpt.train import train

    return train(args.data, args.tokenizer, args.out, device=args.device, resume=args.resume, force=args.force,
                 log=log, stop_after=stop_after, **_given(args, [*MODEL_DEFAULTS, *TRAIN_DEFAULTS]))


def cmd_sample(args: argparse.Namespace) -> None:
    """`bpe gpt sample`: printed piece by piece as the tokens are sampled."""
    from bpe.gpt.sampling import sample

    last = ""
    for piece in sample(args.ckpt, args.prompt, max_new_tokens=args.tokens, temperature=args.temperature,
                        top_k=args.top_k, seed=args.seed, tokenizer=args.tokenizer, device=args.device,
                        cache=not args.no_cache):
        sys.stdout.write(piece)
        sys.stdout.flush()
        last = piece
    if not last.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


def cmd_eval(args: argparse.Namespace) -> None:
    """`bpe gpt eval`."""
    from bpe.cli.io import CommandLineError
    from bpe.gpt.evaluation import evaluate

    if bool(args.files) == bool(args.data):
        raise CommandLineError("give the text to evaluate on: FILEs or --data DIR (one of the two)")
    r = evaluate(args.ckpt, args.files or None, data=args.data, split=args.split, tokenizer=args.tokenizer,
                 stride=args.stride, batch_size=args.batch_size, limit=args.limit, device=args.device)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"{r['bits_per_byte']:.4f} bits/byte ({r['nats_per_token']:.4f} nats/token over {r['tokens']:,} "
              f"tokens, {r['bytes']:,} bytes, {r['windows']:,} windows of stride {r['stride']})")


def cmd_compare(args: argparse.Namespace) -> None:
    """`bpe gpt compare`: the table (or JSON) on stdout; after Ctrl-C, what
    was evaluated, then exit status 130."""
    from bpe._util.files import check_output_file
    from bpe.gpt.comparison import compare
    from bpe.gpt.report import format_markdown, format_table, plot, require_matplotlib

    if args.plot:  # before minutes of training: the file can be written, matplotlib is there
        check_output_file(args.plot, force=args.force)
        require_matplotlib()
    result = compare(args.tokenizers, args.data, eval=args.eval, budget=args.budget, limit=args.limit,
                     holdout=args.holdout, seeds=args.seeds, seed=args.seed, evals=args.evals, stride=args.stride,
                     device=args.device, threads=args.threads, save=args.save, force=args.force,
                     progress=False if args.quiet else None,
                     **_given(args, [*(n for n, _, _ in SETTINGS), "warmup"]))
    if args.json:
        print(json.dumps(result, indent=2))
    elif result["rows"]:
        print((format_markdown if args.markdown else format_table)(result["rows"]))
    else:
        print("nothing was evaluated", file=sys.stderr)
    sys.stdout.flush()
    if args.plot and result["rows"]:
        plot(result, args.plot, force=args.force)
    if result["interrupted"]:
        raise KeyboardInterrupt
