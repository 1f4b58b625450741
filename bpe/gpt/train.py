"""`bpe gpt train` and `bpe gpt sample`: the GPT of bpe/gpt/model.py on a dataset
written by `bpe encode FILE... -t TOK --out DIR`.

torch and numpy are imported inside the commands, never at import time:
`bpe --help`, `bpe encode` and `import bpe` work without them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from bpe._util.files import UsageError, atomic_write, check_output_file, check_readable_file
from bpe.tokenizer import Tokenizer

CKPT_FORMAT = "bpe-gpt v1"
TORCH_MISSING = "`bpe gpt` needs PyTorch and numpy: pip install -e '.[model]' (or: pip install torch numpy)"

# Defaults of `bpe gpt train`, kept here (not in argparse) so that --resume can
# tell an option the user typed from one left at its default.
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
# Options that may change when resuming: they do not alter what was learned.
RESUMABLE = {"steps", "eval_interval", "eval_iters", "log_interval"}


def _torch():
    try:
        import numpy  # noqa: F401
        import torch
    except ImportError:
        raise UsageError(TORCH_MISSING) from None
    return torch


def _positive(args: argparse.Namespace) -> None:
    for name in ("steps", "batch_size", "block_size", "n_layer", "n_head", "n_embd", "eval_interval",
                 "eval_iters", "log_interval"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    for name in ("lr", "min_lr", "weight_decay", "grad_clip", "warmup"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise UsageError(f"--{name.replace('_', '-')} must not be negative, got {value}")


def _device(torch, name: str):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"unknown device {name!r}; use auto, cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda, but PyTorch sees no CUDA GPU; use --device cpu (or auto)")
    return device


# -- learning rate -------------------------------------------------------------


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


# -- checkpoints -----------------------------------------------------------------


def save_checkpoint(torch, path: str, state: dict, force: bool = False) -> None:
    """torch.save to a temporary file beside ``path``, fsync, rename: a crash
    or Ctrl-C mid-save leaves the previous checkpoint, never half of one."""
    atomic_write(path, lambda f: torch.save(state, f), force=force)


def load_checkpoint(torch, path: str) -> dict:
    check_readable_file(path)
    try:
        # weights_only: a checkpoint is data (tensors, numbers, strings);
        # refusing pickled code makes loading someone else's file safe.
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a bad file
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(
            f"{path} is not a checkpoint written by `bpe gpt train` (torch.load: {detail}); "
            f"give the --out file of a training run"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CKPT_FORMAT:
        raise UsageError(f"{path} is not a {CKPT_FORMAT} checkpoint; train one with `bpe gpt train`")
    return ckpt


def _tokenizer_from_checkpoint(ckpt: dict, path: str) -> Tokenizer:
    # The checkpoint carries its tokenizer file, so sampling needs nothing else.
    return Tokenizer._parse(ckpt["tokenizer"].encode("utf-8"), f"{path} (its embedded tokenizer)")


# -- train -------------------------------------------------------------------------


def _settings(args: argparse.Namespace, ckpt: dict | None) -> tuple[dict, dict]:
    """Model and training settings: the checkpoint's when resuming (only
    RESUMABLE options may differ), else the command line's over the defaults."""
    given = {k: getattr(args, k) for k in (*MODEL_DEFAULTS, *TRAIN_DEFAULTS) if getattr(args, k) is not None}
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
            raise UsageError(
                f"--{k.replace('_', '-')} {v} differs from the checkpoint's {old}; a resumed run keeps its "
                f"settings (only --steps, --eval-interval, --eval-iters, --log-interval may change): "
                f"drop the option, or start a new run with another --out"
            )
        train[k] = v
    if train["steps"] < ckpt["step"]:
        raise UsageError(f"--steps {train['steps']} is below the checkpoint's step {ckpt['step']}; give more steps")
    return model, train


def _param_groups(model) -> list[dict]:
    # Decay matrices (embeddings, linear weights), not biases or LayerNorm
    # gains: shrinking those towards 0 only fights the normalisation.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]


def evaluate(torch, model, data, block_size: int, batch_size: int, max_windows: int, device, autocast) -> float:
    """Mean loss (nats/token) over evenly spread windows of ``data``."""
    from bpe.data.reading import eval_windows

    import numpy as np

    starts = eval_windows(data, block_size, max_windows)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(starts), batch_size):
            rows = np.stack([np.asarray(data[s : s + block_size + 1], dtype=np.int64) for s in starts[i : i + batch_size]])
            xy = torch.from_numpy(rows).to(device)  # (b, T+1)
            with autocast():
                _, loss = model(xy[:, :-1], xy[:, 1:])
            total += loss.item() * xy[:, 1:].numel()
            count += xy[:, 1:].numel()
    model.train()
    return total / count


def cmd_train(args: argparse.Namespace, *, stop_after: int | None = None, log=None) -> dict:
    """`bpe gpt train`. ``stop_after`` (tests only) stops, with a checkpoint,
    after that many steps in all, as if the run had been interrupted there."""
    _positive(args)
    torch = _torch()
    from bpe import data as bdata
    from bpe.gpt.model import GPT, GPTConfig

    log = log or (lambda msg: print(msg, flush=True))
    device = _device(torch, args.device)
    tok_path = args.tokenizer
    try:
        meta = bdata.load_meta(args.data)
    except bdata.DatasetError as e:
        raise UsageError(str(e)) from None
    tok = Tokenizer.from_name_or_path(tok_path)
    # The checkpoint embeds the tokenizer as its file text: a .bpe file, or
    # what saving any other tokenizer (a name, a .tiktoken) would write.
    tok_text = tok._dumps()
    tok_sha = bdata.tokenizer_sha256(tok)
    if meta["tokenizer"]["sha256"] != tok_sha:
        raise UsageError(
            f"{args.data} was encoded with another tokenizer ({meta['tokenizer']['file']}), not {tok_path}; "
            f"pass that one with -t, or re-encode: bpe encode FILE... -t {tok_path} --out {args.data}"
        )

    ckpt = None
    if args.resume:
        if not os.path.exists(args.out):
            raise UsageError(f"--resume, but {args.out} does not exist; drop --resume to start a new run")
        check_output_file(args.out, what="a checkpoint file name", force=args.force)
        ckpt = load_checkpoint(torch, args.out)
        if ckpt["tokenizer_sha256"] != tok_sha:
            raise UsageError(f"{args.out} was trained with another tokenizer than {tok_path}; use another --out")
    else:
        check_output_file(args.out, what=f"a checkpoint file name, e.g. {args.out}/gpt.pt", force=args.force)
    model_cfg, tc = _settings(args, ckpt)
    train_data = bdata.load_split(args.data, "train")
    val_data = bdata.load_split(args.data, "val")
    for name, split in (("train", train_data), ("val", val_data)):
        if len(split) < model_cfg["block_size"] + 1:
            raise UsageError(
                f"the {name} split has {len(split)} tokens, fewer than --block-size + 1 = "
                f"{model_cfg['block_size'] + 1}; use a smaller --block-size or more text"
            )

    torch.manual_seed(tc["seed"])  # the initial weights
    cfg = GPTConfig(n_vocab=tok.n_vocab, **model_cfg)
    model = GPT(cfg).to(device)
    cuda = device.type == "cuda"
    if cuda:
        # Whatever autocast leaves in float32 may use TF32 tensor cores.
        torch.set_float32_matmul_precision("high")
    optimizer = torch.optim.AdamW(
        _param_groups(model), lr=tc["lr"], betas=(0.9, 0.95), weight_decay=tc["weight_decay"],
        **({"fused": True} if cuda else {}),
    )
    # The batches come from their own generator, saved in the checkpoint, so
    # that a resumed run draws exactly the batches the uninterrupted one would.
    gen = torch.Generator().manual_seed(tc["seed"])
    step = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        gen.set_state(ckpt["generator"])
        step = ckpt["step"]

    def autocast():
        # bf16 on CUDA: half the memory traffic, tensor cores, and (unlike
        # fp16) fp32's exponent range, so no loss scaling is needed. On CPU,
        # float32: bf16 matmuls are slow on most CPUs.
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=cuda)

    baseline = bdata.unigram_baseline(args.data)
    n_params = model.n_params()
    log(f"model: {n_params / 1e6:.2f}M parameters ({cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} wide, "
        f"context {cfg.block_size}, vocab {cfg.n_vocab} padded to {cfg.vocab_size}) on {device}"
        f"{' (bf16 autocast)' if cuda else ''}")
    log(f"data: {len(train_data):,} train / {len(val_data):,} val tokens; "
        f"unigram baseline {baseline['nats_per_token']:.4f} nats/token = {baseline['bits_per_byte']:.4f} bits/byte")
    if step:
        log(f"resuming {args.out} at step {step}")

    B, T = tc["batch_size"], cfg.block_size
    schedule = dict(lr=tc["lr"], min_lr=tc["min_lr"], warmup=tc["warmup"], steps=tc["steps"])
    max_windows = tc["eval_iters"] * B
    last = {"val_loss": ckpt.get("val_loss") if ckpt else None}

    def checkpoint(val_loss: float | None) -> None:
        save_checkpoint(torch, args.out, {
            "format": CKPT_FORMAT,
            "step": step,
            "model_config": {"n_vocab": cfg.n_vocab, **model_cfg},
            "train_config": tc,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "generator": gen.get_state(),
            "tokenizer": tok_text,
            "tokenizer_sha256": tok_sha,
            "dataset": {"dir": args.data, "meta": meta},
            "val_loss": val_loss,
            "val_bits_per_byte": None if val_loss is None else bdata.bits_per_byte(val_loss, meta),
        }, force=args.force)

    def validate() -> float:
        val = evaluate(torch, model, val_data, T, B, max_windows, device, autocast)
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
        lr = learning_rate(step, **schedule)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = bdata.get_batch(train_data, B, T, generator=gen, device=device)  # (B, T), (B, T)
        with autocast():
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc["grad_clip"] > 0:
            # One bad batch must not undo many good steps: cap the update's size.
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_clip"])
        optimizer.step()
        step += 1
        tokens_since += B * T
        tokens_total += B * T
        if step % tc["log_interval"] == 0 or step == end:
            loss_value = loss.item()  # synchronises with the GPU, hence only here
            if not math.isfinite(loss_value):
                raise UsageError(f"the loss became {loss_value} at step {step}; lower --lr (now {tc['lr']})")
            now = time.perf_counter()
            log(f"step {step}/{tc['steps']} | loss {loss_value:.4f} | lr {lr:.2e} | "
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
            f"{tokens_total / elapsed:,.0f} tokens/s with evaluation and checkpoints; checkpoint {args.out}")
    elif ckpt is not None:
        log(f"{args.out} is already at step {step} of {tc['steps']}; raise --steps to train on")
    return {"step": step, "val_loss": last["val_loss"], "baseline": baseline,
            "tokens_per_s": tokens_total / (elapsed - eval_time) if tokens_total else None}


# -- sample -------------------------------------------------------------------------


def cmd_sample(args: argparse.Namespace) -> None:
    if args.tokens < 0:
        raise UsageError(f"--tokens must not be negative, got {args.tokens}")
    if args.temperature < 0:
        raise UsageError(f"--temperature must not be negative, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError(f"--top-k must be at least 1, got {args.top_k}")
    torch = _torch()
    from bpe.gpt.model import GPT, GPTConfig, stream_text

    device = _device(torch, args.device)
    ckpt = load_checkpoint(torch, args.ckpt)
    tok = _tokenizer_from_checkpoint(ckpt, args.ckpt)
    model = GPT(GPTConfig(**ckpt["model_config"]))
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    gen = None
    if args.seed is not None:
        gen = torch.Generator(device=device).manual_seed(args.seed)
    # Printed token by token as it is sampled (whole characters only: the
    # streaming decoder holds back a token that ends mid-character).
    last = ""
    for piece in stream_text(model, tok, args.prompt, args.tokens, args.temperature, args.top_k, generator=gen):
        sys.stdout.write(piece)
        sys.stdout.flush()
        last = piece
    if not last.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()
