"""``bpe gpt compare``: tokenizers judged by the model they feed.

For each tokenizer: encode the training text and the held-out text (the
Rust core, all cores), train the same GPT under the same budget, and
measure bits per byte on the whole held-out text (``bpe/gpt/evaluation.py``),
at ``evals`` points along the way and at the end.

**The fair budget.** Every tokenizer gets the same model body (``n_layer``,
``n_head``, ``n_embd``, ``block_size`` in tokens: the same non-embedding
parameters) and the same number of training **bytes**: a run takes

    steps = ceil(budget / (batch_size * block_size * bytes per token of its training ids))

optimizer steps of ``batch_size`` windows of ``block_size`` tokens, so a
tokenizer that packs more bytes into a token takes fewer steps. The
learning-rate schedule (warm-up over ``warmup`` of the steps, then a
cosine to ``min_lr``) is stretched over each run's own steps. What differs,
and is reported: the embedding parameters (vocabulary × width, plus the
positions), the tokens and the FLOPs, counted as

    FLOPs = tokens * (6 * (N + V * C) + 12 * n_layer * C * block_size)

with N the non-embedding parameters, V * C the output layer's matrix (tied
to the embedding, whose look-up costs nothing) and the last term the
attention scores and their weighted sums (PaLM's count; nanoGPT's
``estimate_mfu``). The bytes seen are counted exactly: the bytes of every
target token of every batch.

Runs are seeded (``seed``, ``seed + 1``, ... for ``seeds`` runs) and
deterministic on the CPU for a seed. Ctrl-C stops the run in progress and
returns what was evaluated so far (``interrupted``).
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from bpe.gpt.evaluation import bits_per_byte, encode_documents, token_byte_lengths
from bpe.gpt.runtime import StopOnInterrupt, cpu_threads, prepare, require_torch, resolve_device, seeded
from bpe.gpt.train import check_settings, learning_rate, make_optimizer, train_step
from bpe.tokenizer import Tokenizer

__all__ = ["BYTES", "DEFAULTS", "byte_tokenizer", "compare", "flops_per_token", "steps_for_budget"]

#: The name that stands for the byte-level tokenizer (256 byte tokens and <|endoftext|>).
BYTES = "bytes"
DEFAULTS = dict(n_layer=4, n_head=4, n_embd=128, block_size=128, batch_size=16, lr=1e-3, min_lr=None,
                warmup=0.05, weight_decay=0.1, grad_clip=1.0)


def byte_tokenizer() -> Tokenizer:
    """No merges: each byte is a token (ids 0..255), and <|endoftext|> is 256."""
    tok = Tokenizer((), special_tokens={"<|endoftext|>": 256})
    tok.name = BYTES
    return tok


def _resolve(tokenizers: Any) -> list[tuple[str, Tokenizer]]:
    if isinstance(tokenizers, (str, os.PathLike, Tokenizer)):
        tokenizers = [tokenizers]
    items = tokenizers.items() if isinstance(tokenizers, Mapping) else [(None, t) for t in tokenizers]
    out, seen = [], set()
    for name, spec in items:
        if isinstance(spec, Tokenizer):
            tok = spec
        elif isinstance(spec, (str, os.PathLike)):
            spec = os.fspath(spec)
            tok = byte_tokenizer() if spec == BYTES and not os.path.exists(spec) else Tokenizer.from_name_or_path(spec)
            name = name or (BYTES if tok.name == BYTES else os.path.basename(spec))
        else:
            raise TypeError(f"a tokenizer is a Tokenizer, a file, a name or {BYTES!r}, not {type(spec).__name__}")
        name = name or tok.name
        if name in seen:
            raise ValueError(f"two tokenizers are named {name}; give each once, or pass a dict {{name: tokenizer}}")
        seen.add(name)
        out.append((name, tok))
    if not out:
        raise ValueError("no tokenizers to compare; give at least one")
    return out


def _paths(files: Any, what: str) -> list[str]:
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    paths = [os.fspath(f) for f in files]
    if not paths:
        raise ValueError(f"{what} is empty; give at least one UTF-8 text file")
    return paths


def _read(data: Any, eval: Any, limit: int | None, holdout: float) -> tuple[list[bytes], list[bytes]]:
    """(training documents, held-out documents) as UTF-8 bytes. Without
    ``eval``, the last ``holdout`` of each data file (from a line start) is
    held out and not trained on."""
    from bpe.inspect.compare import read_corpus

    docs = [read_corpus(p, limit) for p in _paths(data, "data")]
    if eval is not None:
        return docs, [read_corpus(p) for p in _paths(eval, "eval")]
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be above 0 and below 1, got {holdout}")
    train, held = [], []
    for doc in docs:
        cut = doc.find(b"\n", int(len(doc) * (1 - holdout))) + 1 or len(doc)
        train.append(doc[:cut])
        held.append(doc[cut:])
    return train, [h for h in held if h]


def steps_for_budget(budget: int, batch_size: int, block_size: int, bytes_per_token: float) -> int:
    """The fair rule: optimizer steps that see ``budget`` training bytes."""
    return max(1, math.ceil(budget / (batch_size * block_size * bytes_per_token)))


def flops_per_token(model) -> int:
    """Training FLOPs per token: 6 (N + V C) + 12 n_layer C block_size
    (forward and backward; see the module's docstring)."""
    cfg = model.cfg
    non_embedding = model.n_params() - model.n_embedding_params()
    return 6 * (non_embedding + cfg.vocab_size * cfg.n_embd) + 12 * cfg.n_layer * cfg.n_embd * cfg.block_size


def _text_figures(tok: Tokenizer, held: list[bytes], ids, lengths) -> dict:
    """bytes/token, tokens/word (fertility), Rényi efficiency of the held-out
    text (``bpe/inspect/metrics.py``), over its ordinary tokens."""
    import numpy as np

    from bpe.inspect import metrics

    ordinary = ids[lengths[ids] > 0]
    n_bytes = sum(len(d) for d in held)
    n_words = sum(len(metrics.word_spans(metrics.utf8_array(d))[0]) for d in held)
    return {"eval_bytes": n_bytes, "eval_tokens": int(len(ordinary)),
            "bytes_per_token": n_bytes / len(ordinary) if len(ordinary) else float("nan"),
            "tokens_per_word": len(ordinary) / n_words if n_words else float("nan"),
            "renyi_efficiency": metrics.renyi_efficiency(np.bincount(ordinary, minlength=tok.n_vocab),
                                                         len(tok.vocab))}


def _run(name: str, tok: Tokenizer, train_ids, eval_ids, lengths, *, seed: int, budget: int, s: dict, evals: int,
         stride: int | None, eval_batch_size: int, device, show: bool | None, log: Callable[[str], None]) -> dict:
    """One training run of one tokenizer; its curve and final evaluation.
    Ctrl-C returns the run as far as it was evaluated (``interrupted``)."""
    torch = require_torch()
    from bpe.data.reading import get_batch
    from bpe.gpt.model import GPT, GPTConfig
    from bpe.gpt.report import TrainingBar

    B, T = s["batch_size"], s["block_size"]
    train_bytes_per_token = float(lengths[train_ids].sum()) / len(train_ids)
    steps = steps_for_budget(budget, B, T, train_bytes_per_token)
    points = {max(1, round(k * steps / evals)) for k in range(1, evals + 1)}  # the steps after which to evaluate
    warmup = round(s["warmup"] * steps) if isinstance(s["warmup"], float) else s["warmup"]
    schedule = dict(lr=s["lr"], min_lr=s["min_lr"], warmup=warmup, steps=steps)
    run = {"tokenizer": name, "seed": seed, "steps": steps, "steps_done": 0, "tokens": 0, "bytes": 0,
           "curve": [], "bits_per_byte": None, "complete": False, "interrupted": False,
           "train_seconds": 0.0, "eval_seconds": 0.0}
    with seeded(seed, device):
        model = GPT(GPTConfig(n_vocab=tok.n_vocab, block_size=T, n_layer=s["n_layer"], n_head=s["n_head"],
                              n_embd=s["n_embd"])).to(device)
        run.update(params=model.n_params(), embedding_params=model.n_embedding_params(),
                   non_embedding_params=model.n_params() - model.n_embedding_params(),
                   flops_per_token=flops_per_token(model))
        optimizer = make_optimizer(model, device, lr=s["lr"], weight_decay=s["weight_decay"])
        gen = torch.Generator().manual_seed(seed)  # the batches' own generator
        sizes = torch.as_tensor(lengths, device=device)  # (n_vocab,): bytes of each id
        seen = torch.zeros((), dtype=torch.int64, device=device)  # bytes of the targets so far
        bar = TrainingBar(f"{name} seed {seed}", steps, budget, show)
        step, t0 = 0, time.perf_counter()
        model.train()
        try:
            with StopOnInterrupt() as stop:
                while step < steps and not stop.requested:
                    x, y = get_batch(train_ids, B, T, generator=gen, device=device)  # (B, T), (B, T)
                    loss = train_step(model, optimizer, x, y, lr=learning_rate(step, **schedule),
                                      grad_clip=s["grad_clip"], device=device)
                    seen += sizes[y].sum()
                    step += 1
                    if bar.due() or step in points:
                        value = loss.item()  # waits for the GPU: only when shown or evaluated
                        if not math.isfinite(value):
                            raise ValueError(f"{name}: the loss became {value} at step {step}; lower lr "
                                             f"(now {s['lr']})")
                        bar.update(step, int(seen), value)
                    if step in points:
                        run["train_seconds"] += time.perf_counter() - t0
                        e0 = time.perf_counter()
                        ev = bits_per_byte(model, eval_ids, lengths, stride=stride, batch_size=eval_batch_size)
                        run["eval_seconds"] += time.perf_counter() - e0
                        run.update(steps_done=step, tokens=step * B * T, bytes=int(seen),
                                   bits_per_byte=ev["bits_per_byte"])
                        run["curve"].append({"step": step, "tokens": step * B * T, "bytes": int(seen),
                                             "bits_per_byte": ev["bits_per_byte"], "loss": value})
                        bar.finish()
                        log(f"{name} seed {seed}: step {step}/{steps}, {int(seen):,} bytes seen, train loss "
                            f"{value:.4f}, held-out {ev['bits_per_byte']:.4f} bits/byte")
                        t0 = time.perf_counter()
                run["complete"] = not stop.requested
                run["interrupted"] = stop.requested
        except KeyboardInterrupt:  # a second Ctrl-C, or one where the handler could not be installed
            run["interrupted"] = True
        finally:
            bar.finish()
        if run["interrupted"]:
            log(f"{name} seed {seed}: interrupted at step {step}/{steps}; keeping what was evaluated")
    run["flops"] = run["tokens"] * run["flops_per_token"]
    run["eval_stats"] = ev if run["curve"] else None
    run["model"] = model
    return run


def _row(name: str, tok: Tokenizer, runs: list[dict], figures: dict) -> dict:
    done = [r for r in runs if r["complete"]] or [r for r in runs if r["curve"]]
    values = [r["bits_per_byte"] for r in done]
    mean = sum(values) / len(values)
    # The sample standard deviation over seeds (None for one seed).
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else None
    first = done[0]

    def avg(key):
        return sum(r[key] for r in done) / len(done)

    return {"tokenizer": name, "vocab": tok.n_vocab, "bits_per_byte": mean, "bits_per_byte_std": std,
            "bits_per_byte_runs": values, "seeds": [r["seed"] for r in done], **figures,
            "params": first["params"], "embedding_params": first["embedding_params"],
            "non_embedding_params": first["non_embedding_params"], "steps": round(avg("steps_done")),
            "train_tokens": round(avg("tokens")), "train_bytes": round(avg("bytes")), "flops": avg("flops"),
            "train_seconds": avg("train_seconds"), "eval_seconds": avg("eval_seconds"),
            "complete": all(r["complete"] for r in runs) and len(runs) == len(done)}


def _save(path: str, name: str, tok: Tokenizer, model, run: dict, s: dict, force: bool) -> str:
    """The run's checkpoint, carrying its tokenizer (``bpe gpt sample``,
    ``bpe gpt eval`` need nothing else)."""
    from bpe.data.dataset import tokenizer_sha256
    from bpe.gpt.checkpoint import save_checkpoint

    save_checkpoint(path, {
        "step": run["steps_done"],
        "model_config": {"n_vocab": tok.n_vocab, **{k: s[k] for k in ("block_size", "n_layer", "n_head", "n_embd")}},
        "train_config": dict(s),
        "model": model.state_dict(),
        "tokenizer": tok._dumps(),
        "tokenizer_sha256": tokenizer_sha256(tok),
        "tokenizer_name": name,
        "compare": {k: v for k, v in run.items() if k != "eval_stats"},
    }, force=force)
    return path


def _compare_all(named: list[tuple[str, Tokenizer]], train_docs: list[bytes], held_docs: list[bytes], result: dict,
                 *, s: dict, seed_list: list[int], budget: int, evals: int, stride: int | None, eval_batch_size: int,
                 device, save: str | None, force: bool, progress: bool | None, log: Callable[[str], None]) -> None:
    """:func:`compare`'s loop: each tokenizer, each seed; rows and runs go
    into ``result``. Stops after a run that Ctrl-C interrupted."""
    for name, tok in named:
        t0 = time.perf_counter()
        train_ids = encode_documents(tok, train_docs)
        eval_ids = encode_documents(tok, held_docs)
        encode_seconds = time.perf_counter() - t0
        if len(train_ids) < s["block_size"] + 1:
            raise ValueError(f"{name}: the training text is {len(train_ids)} tokens, fewer than block_size + 1 = "
                             f"{s['block_size'] + 1}; give more data or a smaller block size")
        lengths = token_byte_lengths(tok)
        figures = {**_text_figures(tok, held_docs, eval_ids, lengths), "train_text_tokens": len(train_ids),
                   "encode_seconds": encode_seconds}
        runs = []
        for sd in seed_list:
            run = _run(name, tok, train_ids, eval_ids, lengths, seed=sd, budget=budget, s=s, evals=evals,
                       stride=stride, eval_batch_size=eval_batch_size, device=device, show=progress, log=log)
            model = run.pop("model")
            if save is not None and run["curve"]:
                run["checkpoint"] = _save(os.path.join(save, f"{name}-seed{sd}.pt"), name, tok, model, run, s, force)
            del model
            runs.append(run)
            result["runs"].append(run)
            if run["interrupted"]:
                break
        if any(r["curve"] for r in runs):
            row = _row(name, tok, runs, figures)
            row["complete"] = row["complete"] and len(runs) == len(seed_list)
            result["rows"].append(row)
        if runs[-1]["interrupted"]:
            result["interrupted"] = True
            break


def compare(tokenizers: Mapping[str, Any] | Sequence[Any] | Any, data: Any, *, eval: Any = None,
            budget: int | str, limit: int | str | None = None, holdout: float = 0.1, seeds: int = 1,
            seed: int = 1337, n_layer: int | None = None, n_head: int | None = None, n_embd: int | None = None,
            block_size: int | None = None, batch_size: int | None = None, lr: float | None = None,
            min_lr: float | None = None, warmup: float | int | None = None, weight_decay: float | None = None,
            grad_clip: float | None = None, evals: int = 5, stride: int | None = None, eval_batch_size: int = 32,
            device: Any = "auto", threads: int | None = None, save: str | os.PathLike | None = None,
            force: bool = False, progress: bool | None = None, log: Callable[[str], None] | None = None) -> dict:
    """Trains the same GPT on each tokenizer's ids of ``data`` under the same
    budget and returns bits per byte on the held-out text, with the
    tokenizers' figures on it (see the module's docstring for the rule).

    ``tokenizers``: Tokenizers, files or names (``"bytes"``: the byte-level
    tokenizer), or a dict ``{name: tokenizer}``. ``data``: UTF-8 text
    files (compressed or not), each a document (``limit``: the first
    ``limit`` bytes of each, e.g. ``"8M"``). ``eval``: the held-out files;
    without them, the last ``holdout`` of each data file. ``budget``:
    training bytes per run (``"2M"`` or an int). ``seeds`` runs per
    tokenizer, seeded ``seed``, ``seed + 1``, ... Model and optimizer
    settings default to :data:`DEFAULTS` (``warmup``: a fraction of the
    steps if a float, else steps). ``evals``: evaluations along each run
    (the curve). ``stride``: see ``bpe/gpt/evaluation.py``. ``threads``:
    torch's CPU threads for the comparison (default: as they are). ``save``: a
    directory for each run's checkpoint (``NAME-seedS.pt``, carrying its
    tokenizer). ``progress``: the bar and progress lines on stderr (default:
    the bar on a terminal, lines always); ``log`` gets the lines instead.

    Returns ``{"settings", "rows", "runs", "interrupted"}``: a row per
    tokenizer (the mean and standard deviation over seeds), a run per
    tokenizer and seed with its curve."""
    from bpe._util.sizes import parse_bytes

    torch = require_torch()
    budget = parse_bytes(budget, "budget")
    limit = None if limit is None else parse_bytes(limit, "limit")
    given = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, batch_size=batch_size,
                 lr=lr, min_lr=min_lr, weight_decay=weight_decay, grad_clip=grad_clip)
    check_settings(given)
    for name, value in (("seeds", seeds), ("evals", evals), ("eval_batch_size", eval_batch_size), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be a whole number, not {type(value).__name__}")
        if value < (0 if name == "seed" else 1):
            raise ValueError(f"{name} must be at least {0 if name == 'seed' else 1}, got {value}")
    s = {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    if warmup is not None:
        if isinstance(warmup, float) and not 0 <= warmup < 1:
            raise ValueError(f"warmup as a float is a fraction of the steps, from 0 to below 1; got {warmup}")
        if isinstance(warmup, int) and warmup < 0:
            raise ValueError(f"warmup must not be negative, got {warmup}")
        s["warmup"] = warmup
    s["min_lr"] = s["lr"] / 10 if s["min_lr"] is None else s["min_lr"]
    if s["n_embd"] % s["n_head"]:
        raise ValueError(f"n_embd ({s['n_embd']}) must be a multiple of n_head ({s['n_head']})")
    if stride is not None and not 1 <= stride <= s["block_size"]:
        raise ValueError(f"stride must be between 1 and block_size ({s['block_size']}), got {stride}")
    device = resolve_device(device)
    if log is None:
        log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress is not False else (lambda msg: None)
    if save is not None:
        save = os.fspath(save)
        if os.path.exists(save) and not os.path.isdir(save):
            raise ValueError(f"save={save} is a file; give a directory for the checkpoints")
        os.makedirs(save, exist_ok=True)

    named = _resolve(tokenizers)
    train_docs, held_docs = _read(data, eval, limit, holdout)
    if not held_docs:
        raise ValueError("the held-out text is empty; give eval files or more data")
    prepare(device)
    seed_list = [seed + k for k in range(seeds)]
    settings = {**s, "budget": budget, "seeds": seed_list, "device": str(device), "evals": evals,
                "stride": stride or s["block_size"], "holdout": None if eval is not None else holdout,
                "data": _paths(data, "data"), "eval": None if eval is None else _paths(eval, "eval"),
                "limit": limit, "train_text_bytes": sum(map(len, train_docs)),
                "eval_text_bytes": sum(map(len, held_docs)), "torch": torch.__version__,
                "threads": threads or torch.get_num_threads(),
                "flops_formula": "tokens * (6 * (non_embedding_params + V_padded * n_embd) "
                                 "+ 12 * n_layer * n_embd * block_size)"}
    result = {"settings": settings, "rows": [], "runs": [], "interrupted": False}
    log(f"comparing {len(named)} tokenizers: {settings['train_text_bytes']:,} bytes of training text, "
        f"{settings['eval_text_bytes']:,} held out; {budget:,} training bytes per run; {s['n_layer']} layers, "
        f"{s['n_head']} heads, {s['n_embd']} wide, context {s['block_size']}, batch {s['batch_size']}; on {device}"
        f"{' (bf16 autocast)' if device.type == 'cuda' else ''}")
    with cpu_threads(threads):
        _compare_all(named, train_docs, held_docs, result, s=s, seed_list=seed_list, budget=budget, evals=evals,
                     stride=stride, eval_batch_size=eval_batch_size, device=device, save=save, force=force,
                     progress=progress, log=log)
    return result
