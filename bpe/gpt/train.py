"""Training the GPT of ``bpe/gpt/model.py`` on a token dataset written by
``bpe encode FILE... -t TOK --out DIR``: :func:`train` (``bpe gpt train``),
with its learning-rate schedule, optimizer and resumable checkpoints. The
pieces a training loop needs (:func:`learning_rate`, :func:`make_optimizer`,
:func:`train_step`) serve ``bpe gpt compare`` too.

torch and numpy are imported when a function runs, never at import time.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

from bpe._util.files import check_output_file
from bpe.gpt.checkpoint import load_checkpoint, save_checkpoint
from bpe.gpt.runtime import autocast, prepare, require_torch, resolve_device, seeded
from bpe.tokenizer import Tokenizer

__all__ = ["MODEL_DEFAULTS", "RESUMABLE", "TRAIN_DEFAULTS", "learning_rate", "make_optimizer", "train",
           "train_step"]

# The defaults of train(); a setting left at None takes its default, or on
# resume the checkpoint's value.
MODEL_DEFAULTS = {"block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 128}
TRAIN_DEFAULTS = {
    "steps": 2000,
    "batch_size": 16,
    "lr": 1e-3,
    "min_lr": None,  # lr / 10
    "warmup": 100,
    "weight_decay": 0.1,
    "grad_clip": 1.0,
    "eval_interval": 250,
    "eval_iters": 20,
    "log_interval": 50,
    "seed": 1337,
}
# Settings that may change when resuming: they do not alter what was learned.
RESUMABLE = {"steps", "eval_interval", "eval_iters", "log_interval"}
WHOLE = {"steps", "batch_size", "block_size", "n_layer", "n_head", "n_embd", "eval_interval", "eval_iters",
         "log_interval"}  # at least 1
NON_NEGATIVE = {"lr", "min_lr", "weight_decay", "grad_clip", "warmup"}


def check_settings(settings: dict) -> None:
    """ValueError/TypeError for a setting out of range, naming it."""
    for name, value in settings.items():
        if value is None:
            continue
        if name in WHOLE or name in ("warmup", "seed"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be a whole number, not {type(value).__name__}")
        elif not isinstance(value, (int, float)) or isinstance(value, bool):
            raise TypeError(f"{name} must be a number, not {type(value).__name__}")
        if name in WHOLE and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
        if name in NON_NEGATIVE and value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")


# -- the pieces of a training loop -------------------------------------------------


def learning_rate(step: int, *, lr: float, min_lr: float, warmup: int, steps: int) -> float:
    """The learning rate of optimizer step ``step`` (0-based).

    Linear warm-up from ~0: Adam's second-moment estimates start from a
    handful of gradients, so early updates would otherwise be large and
    noisy. Then a cosine from ``lr`` down to ``min_lr`` at the last step:
    large steps while the loss falls fast, small ones to settle at the end."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if steps <= warmup:
        return lr
    progress = min(1.0, (step - warmup) / max(1, steps - 1 - warmup))
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


def make_optimizer(model, device, *, lr: float, weight_decay: float):
    """AdamW (betas 0.9, 0.95; fused on CUDA). Decays matrices (embeddings,
    linear weights), not biases or LayerNorm gains: shrinking those towards
    0 only fights the normalisation."""
    torch = require_torch()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay,
                             **({"fused": True} if device.type == "cuda" else {}))


def train_step(model, optimizer, x, y, *, lr: float, grad_clip: float, device):
    """One optimizer step on the batch ``x``, ``y`` (B, T) at learning rate
    ``lr``; returns the loss (a 0-d tensor, still on the device: reading it
    synchronises with the GPU)."""
    torch = require_torch()
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(device):
        _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        # One bad batch must not undo many good steps: cap the update's size.
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


# -- bpe gpt train -------------------------------------------------------------------


def _settings(given: dict, ckpt: dict | None) -> tuple[dict, dict]:
    """Model and training settings: the checkpoint's when resuming (only
    RESUMABLE ones may differ), else ``given`` over the defaults."""
    given = {k: v for k, v in given.items() if v is not None}
    if ckpt is None:
        model = {k: given.get(k, v) for k, v in MODEL_DEFAULTS.items()}
        train = {k: given.get(k, v) for k, v in TRAIN_DEFAULTS.items()}
        if train["min_lr"] is None:
            train["min_lr"] = train["lr"] / 10
        return model, train
    model = {k: ckpt["model_config"][k] for k in MODEL_DEFAULTS}
    train = dict(ckpt["train_config"])
    for k, v in given.items():
        old = model.get(k, train.get(k))
        if v == old:
            continue
        if k not in RESUMABLE:
            raise ValueError(
                f"{k}={v} differs from the checkpoint's {old}; a resumed run keeps its settings (only steps, "
                f"eval_interval, eval_iters, log_interval may change): leave it out, or start a new run "
                f"with another output file"
            )
        train[k] = v
    if train["steps"] < ckpt["step"]:
        raise ValueError(f"steps={train['steps']} is below the checkpoint's step {ckpt['step']}; give more steps")
    return model, train


def train(data: str | os.PathLike, tokenizer: Tokenizer | str | os.PathLike, out: str | os.PathLike = "gpt.pt",
          *, steps: int | None = None, batch_size: int | None = None, block_size: int | None = None,
          n_layer: int | None = None, n_head: int | None = None, n_embd: int | None = None,
          lr: float | None = None, min_lr: float | None = None, warmup: int | None = None,
          weight_decay: float | None = None, grad_clip: float | None = None, eval_interval: int | None = None,
          eval_iters: int | None = None, log_interval: int | None = None, seed: int | None = None,
          device: Any = "auto", resume: bool = False, force: bool = False,
          log: Callable[[str], None] | None = None, stop_after: int | None = None) -> dict:
    """Trains a GPT on the dataset ``data`` (``bpe encode FILE... -t TOK --out
    DIR``, or a sharded directory) encoded by ``tokenizer``: AdamW, linear
    warm-up then cosine decay, gradient clipping, and every
    ``eval_interval`` steps a validation loss (:func:`estimate_loss` on
    ``eval_iters`` batches, in nats/token and bits/byte) and an atomic
    checkpoint at ``out`` carrying the tokenizer. Settings left at None
    take :data:`MODEL_DEFAULTS` / :data:`TRAIN_DEFAULTS`, or with
    ``resume`` the checkpoint's (only ``steps`` and the evaluation and
    logging intervals may then change). ``log`` gets each progress line
    (default: print). ``stop_after`` stops, with a checkpoint, after that
    many steps in all, as an interrupted run would.

    Returns ``{"step", "val_loss", "baseline", "tokens_per_s"}``."""
    torch = require_torch()
    from bpe import data as bdata
    from bpe.gpt.evaluation import estimate_loss
    from bpe.gpt.model import GPT, GPTConfig

    given = dict(steps=steps, batch_size=batch_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                 n_embd=n_embd, lr=lr, min_lr=min_lr, warmup=warmup, weight_decay=weight_decay,
                 grad_clip=grad_clip, eval_interval=eval_interval, eval_iters=eval_iters,
                 log_interval=log_interval, seed=seed)
    check_settings(given)
    log = log or (lambda msg: print(msg, flush=True))
    device = resolve_device(device)
    data, out = os.fspath(data), os.fspath(out)
    meta = bdata.load_meta(data)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.from_name_or_path(tokenizer)
    tok_name = tokenizer if not isinstance(tokenizer, Tokenizer) else getattr(tok, "name", "the tokenizer")
    # The checkpoint embeds the tokenizer as its file text: a .bpe file, or
    # what saving any other tokenizer (a name, a .tiktoken) would write.
    tok_text = tok._dumps()
    tok_sha = bdata.tokenizer_sha256(tok)
    if meta["tokenizer"]["sha256"] != tok_sha:
        raise ValueError(
            f"{data} was encoded with another tokenizer ({meta['tokenizer']['file']}), not {tok_name}; "
            f"give that one, or re-encode: bpe encode FILE... -t {tok_name} --out {data}"
        )
    ckpt = None
    if resume:
        if not os.path.exists(out):
            raise ValueError(f"resume, but {out} does not exist; drop --resume (resume=False) to start a new run")
        check_output_file(out, what="a checkpoint file name", force=force)
        ckpt = load_checkpoint(out)
        if ckpt.get("tokenizer_sha256") != tok_sha:
            raise ValueError(f"{out} was trained with another tokenizer than {tok_name}; write to another file")
    else:
        check_output_file(out, what=f"a checkpoint file name, e.g. {out}/gpt.pt", force=force)
    model_cfg, tc = _settings(given, ckpt)
    train_data = bdata.load_split(data, "train")
    val_data = bdata.load_split(data, "val")
    for name, split in (("train", train_data), ("val", val_data)):
        if len(split) < model_cfg["block_size"] + 1:
            raise ValueError(
                f"the {name} split has {len(split)} tokens, fewer than block_size + 1 = "
                f"{model_cfg['block_size'] + 1}; use a smaller block size or more text"
            )

    cfg = GPTConfig(n_vocab=tok.n_vocab, **model_cfg)
    with seeded(tc["seed"], device):  # the initial weights
        model = GPT(cfg).to(device)
    prepare(device)
    optimizer = make_optimizer(model, device, lr=tc["lr"], weight_decay=tc["weight_decay"])
    # The batches come from their own generator, saved in the checkpoint, so
    # that a resumed run draws exactly the batches the uninterrupted one would.
    gen = torch.Generator().manual_seed(tc["seed"])
    step = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["generator"])
        step = ckpt["step"]

    baseline = bdata.unigram_baseline(data)
    cuda = device.type == "cuda"
    log(f"model: {model.n_params() / 1e6:.2f}M parameters ({cfg.n_layer} layers, {cfg.n_head} heads, "
        f"{cfg.n_embd} wide, context {cfg.block_size}, vocab {cfg.n_vocab} padded to {cfg.vocab_size}) on {device}"
        f"{' (bf16 autocast)' if cuda else ''}")
    log(f"data: {len(train_data):,} train / {len(val_data):,} val tokens; "
        f"unigram baseline {baseline['nats_per_token']:.4f} nats/token = {baseline['bits_per_byte']:.4f} bits/byte")
    if step:
        log(f"resuming {out} at step {step}")

    B, T = tc["batch_size"], cfg.block_size
    schedule = dict(lr=tc["lr"], min_lr=tc["min_lr"], warmup=tc["warmup"], steps=tc["steps"])
    last = {"val_loss": ckpt.get("val_loss") if ckpt else None}

    def checkpoint(val_loss: float | None) -> None:
        save_checkpoint(out, {
            "step": step,
            "model_config": {"n_vocab": cfg.n_vocab, **model_cfg},
            "train_config": tc,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "generator": gen.get_state(),
            "tokenizer": tok_text,
            "tokenizer_sha256": tok_sha,
            "tokenizer_name": getattr(tok, "name", None),
            "dataset": {"dir": data, "meta": meta},
            "val_loss": val_loss,
            "val_bits_per_byte": None if val_loss is None else bdata.bits_per_byte(val_loss, meta),
        }, force=force)

    def validate() -> float:
        val = estimate_loss(model, val_data, batch_size=B, max_windows=tc["eval_iters"] * B)
        last["val_loss"] = val
        bpb = bdata.bits_per_byte(val, meta)
        log(f"step {step}: val loss {val:.4f} nats/token, {bpb:.4f} bits/byte "
            f"(unigram {baseline['nats_per_token']:.4f} / {baseline['bits_per_byte']:.4f})")
        return val

    model.train()
    end = tc["steps"] if stop_after is None else min(tc["steps"], stop_after)
    t0, tokens_since = time.perf_counter(), 0
    started, tokens_total, eval_time = time.perf_counter(), 0, 0.0
    while step < end:
        lr_now = learning_rate(step, **schedule)
        x, y = bdata.get_batch(train_data, B, T, generator=gen, device=device)  # (B, T), (B, T)
        loss = train_step(model, optimizer, x, y, lr=lr_now, grad_clip=tc["grad_clip"], device=device)
        step += 1
        tokens_since += B * T
        tokens_total += B * T
        if step % tc["log_interval"] == 0 or step == end:
            loss_value = loss.item()  # synchronises with the GPU, hence only here
            if not math.isfinite(loss_value):
                raise ValueError(f"the loss became {loss_value} at step {step}; lower the learning rate "
                                 f"(now {tc['lr']})")
            now = time.perf_counter()
            log(f"step {step}/{tc['steps']} | loss {loss_value:.4f} | lr {lr_now:.2e} | "
                f"{tokens_since / (now - t0):,.0f} tokens/s")
            t0, tokens_since = now, 0
        if step % tc["eval_interval"] == 0 or step == end:
            e0 = time.perf_counter()
            checkpoint(validate())
            spent = time.perf_counter() - e0
            eval_time += spent
            t0 += spent  # tokens/s measures training only
    elapsed = time.perf_counter() - started
    if tokens_total:
        log(f"step {step}: {tokens_total // (B * T)} steps in this run, {tokens_total:,} tokens in {elapsed:.0f} s; "
            f"{tokens_total / (elapsed - eval_time):,.0f} tokens/s training, "
            f"{tokens_total / elapsed:,.0f} tokens/s with evaluation and checkpoints; checkpoint {out}")
    elif ckpt is not None:
        log(f"{out} is already at step {step} of {tc['steps']}; raise steps to train on")
    return {"step": step, "val_loss": last["val_loss"], "baseline": baseline,
            "tokens_per_s": tokens_total / (elapsed - eval_time) if tokens_total else None}
