"""`bpe gpt train` and `bpe gpt sample`: the command line of the GPT
(``bpe/gpt/``) on a dataset written by `bpe encode FILE... -t TOK --out DIR`.
torch is imported only when a command runs."""

from __future__ import annotations

from bpe.gpt.train import MODEL_DEFAULTS, TRAIN_DEFAULTS, cmd_sample, cmd_train

__all__ = ["add_parser"]


def add_parser(sub) -> None:
    """Adds `gpt train` and `gpt sample` to the `bpe` command's subparsers."""
    g = sub.add_parser("gpt", help="train a small GPT on an encoded dataset, or sample from one")
    gsub = g.add_subparsers(dest="gpt_command", required=True, metavar="GPT_COMMAND")

    t = gsub.add_parser(
        "train",
        help="train a GPT on DIR/train.bin (from `bpe encode ... --out DIR`)",
        description="Trains the GPT of bpe/gpt/model.py: AdamW, linear warm-up then cosine decay, gradient "
        "clipping, validation loss every --eval-interval steps (in nats/token and bits/byte), and an "
        "atomic checkpoint each time. CPU, or CUDA with bf16 when available.",
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
    d = {**MODEL_DEFAULTS, **TRAIN_DEFAULTS}
    for name, typ, help_ in [
        ("steps", int, "optimizer steps in all"),
        ("batch_size", int, "sequences per step"),
        ("block_size", int, "context length in tokens"),
        ("n_layer", int, "transformer blocks"),
        ("n_head", int, "attention heads"),
        ("n_embd", int, "embedding width (a multiple of --n-head)"),
        ("lr", float, "peak learning rate"),
        ("min_lr", float, "final learning rate (default lr/10)"),
        ("warmup", int, "steps of linear warm-up"),
        ("weight_decay", float, "AdamW weight decay (matrices only)"),
        ("grad_clip", float, "clip the gradient norm to this (0: off)"),
        ("eval_interval", int, "steps between validation and checkpoints"),
        ("eval_iters", int, "validation batches per evaluation"),
        ("log_interval", int, "steps between progress lines"),
        ("seed", int, "random seed (initialisation and batches)"),
    ]:
        default = d[name]
        t.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=None,
                       metavar="N" if typ is int else "X",
                       help=f"{help_} (default {default})" if default is not None else help_)
    t.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:1, ...")
    t.set_defaults(func=cmd_train)

    s = gsub.add_parser("sample", help="print text sampled from a trained GPT")
    s.add_argument("--ckpt", required=True, metavar="CKPT", help="checkpoint written by `bpe gpt train`")
    s.add_argument("--prompt", default="", help="text to continue (default: start of a document)")
    s.add_argument("--tokens", type=int, default=200, metavar="N", help="tokens to generate (default 200)")
    s.add_argument("--temperature", type=float, default=0.8, help="below 1: safer, above 1: wilder (default 0.8)")
    s.add_argument("--top-k", type=int, default=None, metavar="K", help="sample among the K likeliest tokens only")
    s.add_argument("--seed", type=int, default=None, help="random seed, for a reproducible sample")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    s.set_defaults(func=cmd_sample)
