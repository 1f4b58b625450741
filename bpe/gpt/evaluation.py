"""Evaluation: bits per byte on a whole text (:func:`bits_per_byte`), from a
checkpoint (:func:`evaluate`, ``bpe gpt eval``), and the quick loss estimate
that training prints (:func:`estimate_loss`).

**Bits per byte**, the measure that compares models across vocabularies::

    bpb = (sum over scored targets of -ln p(target | context)) / (ln 2 * bytes)

- The text is encoded with special-token text as ordinary text, each
  document preceded by ``<|endoftext|>`` when the tokenizer has that token
  (:func:`encode_documents`), so every token of the text is a target.
- A target that is a special token is left out of the sum and counts no
  bytes; every other target counts the bytes of its token, so ``bytes`` is
  the UTF-8 length of the text (of each document after its first token
  when the tokenizer has no ``<|endoftext|>``: the first token of a text
  then has no context and is not scored).
- Windows (:func:`windows`): the model reads at most ``block_size`` tokens.
  The first window reads ids 0..block_size-1 and scores its block_size
  targets (ids 1..block_size). Each next window ends ``stride`` targets
  further on (or at the end of the text), reads the ``block_size`` tokens
  before its end, and scores only the targets no window scored before.
  Every target is scored exactly once. With ``stride`` = ``block_size`` (the
  default) the windows do not overlap, so each target's context is the
  tokens before it in its window (0 to block_size - 1 of them), except in
  the last window, which reaches back to read a whole block_size tokens
  for the few targets left. With a smaller ``stride`` every target after
  the first window sees at least ``block_size - stride`` tokens of context
  (slower by ``block_size / stride``).
- Losses are summed in float32 per token (the model computes its logits
  under bf16 autocast on CUDA) and in float64 across tokens.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Iterable

from bpe.data.reading import eval_windows
from bpe.gpt.runtime import autocast, require_torch
from bpe.tokenizer import Tokenizer

if TYPE_CHECKING:
    import numpy as np

__all__ = ["bits_per_byte", "encode_documents", "estimate_loss", "evaluate", "token_byte_lengths", "windows"]

ENDOFTEXT = "<|endoftext|>"
# Logits held at once while evaluating: rows x positions x vocabulary floats.
LOGITS_BUDGET = 1 << 24


def token_byte_lengths(tok: Tokenizer) -> "np.ndarray":
    """(n_vocab,) int64: the byte length of each id's token, 0 for special
    tokens (they are not text) and for ids the tokenizer does not use."""
    import numpy as np

    lengths = np.zeros(tok.n_vocab, dtype=np.int64)
    for i, b in tok.vocab.items():
        lengths[i] = len(b)
    for i in tok.special_tokens.values():
        lengths[i] = 0
    return lengths


def encode_documents(tok: Tokenizer, texts: Iterable[str | bytes], *, threads: int | None = None) -> "np.ndarray":
    """The ids of ``texts`` (UTF-8 ``bytes`` or ``str``), one after the other,
    each preceded by ``<|endoftext|>`` when ``tok`` has it; special-token
    text in them is ordinary text. The Rust core encodes (all cores unless
    ``threads``); the ids are int64."""
    import numpy as np

    eot = tok.special_tokens.get(ENDOFTEXT)
    parts = []
    for text in texts:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if eot is not None:
            parts.append(np.array([eot], dtype=np.int64))
        parts.append(tok.encode_to_numpy(text, disallowed_special=(), num_threads=threads).astype(np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def windows(n_ids: int, block_size: int, stride: int | None = None) -> list[tuple[int, int, int]]:
    """The evaluation windows of ``n_ids`` ids, as ``(a, b, first)``: the
    model reads ids[a:b] (at most ``block_size`` of them) and predicts
    ids[a+1:b+1]; the targets from index ``first`` of the window on are
    scored. Every target (ids 1..n_ids-1) is scored exactly once; see the
    module's docstring for the rule."""
    stride = block_size if stride is None else stride
    if not 1 <= stride <= block_size:
        raise ValueError(f"stride must be between 1 and block_size ({block_size}), got {stride}")
    out, done = [], 0  # done: targets 1..done are scored
    while done < n_ids - 1:
        b = min(done + stride if done else block_size, n_ids - 1)
        a = max(0, b - block_size)
        out.append((a, b, done - a))
        done = b
    return out


def bits_per_byte(model, ids: Any, token_bytes: Any, *, stride: int | None = None, batch_size: int = 32) -> dict:
    """Bits per byte of ``model`` on the whole of ``ids`` (a 1-D array, e.g.
    from :func:`encode_documents`), the tokens' byte lengths being
    ``token_bytes`` (:func:`token_byte_lengths`). Returns ``bits_per_byte``,
    ``nats_per_token`` and ``bits_per_token`` (over the scored tokens),
    ``bytes`` and ``tokens`` scored, ``windows``, ``stride``."""
    torch = require_torch()
    import numpy as np

    T = model.cfg.block_size
    plan = windows(len(ids), T, stride)
    device = next(model.parameters()).device
    lengths = torch.as_tensor(np.asarray(token_bytes, dtype=np.int64), device=device)  # (n_vocab,)
    rows = max(1, min(batch_size, LOGITS_BUDGET // (T * model.cfg.vocab_size)))
    nats, n_bytes, n_tokens = 0.0, 0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            i = 0
            while i < len(plan):
                length = plan[i][1] - plan[i][0]
                j = i
                while j < len(plan) and j - i < rows and plan[j][1] - plan[j][0] == length:
                    j += 1
                batch = plan[i:j]
                xy = np.stack([np.asarray(ids[a : b + 1], dtype=np.int64) for a, b, _ in batch])  # (b, L + 1)
                xy = torch.from_numpy(xy).to(device)
                x, y = xy[:, :-1], xy[:, 1:]  # (b, L), (b, L)
                first = torch.tensor([f for _, _, f in batch], device=device)  # (b,)
                scored = torch.arange(length, device=device)[None, :] >= first[:, None]  # (b, L)
                with autocast(device):
                    logits, _ = model(x)  # (b, L, V)
                nll = torch.nn.functional.cross_entropy(
                    logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none"
                ).view_as(y)  # (b, L), nats
                size = lengths[y] * scored  # (b, L): bytes of each scored target, 0 for special tokens
                counted = size > 0
                nats += float(nll[counted].double().sum())
                n_bytes += int(size.sum())
                n_tokens += int(counted.sum())
                i = j
    finally:
        model.train(was_training)
    per_token = nats / n_tokens if n_tokens else float("nan")
    return {
        "bits_per_byte": nats / (math.log(2) * n_bytes) if n_bytes else float("nan"),
        "nats_per_token": per_token,
        "bits_per_token": per_token / math.log(2),
        "bytes": n_bytes,
        "tokens": n_tokens,
        "windows": len(plan),
        "stride": T if stride is None else stride,
    }


def estimate_loss(model, data: Any, *, batch_size: int, max_windows: int) -> float:
    """Mean loss (nats/token) over ``max_windows`` evenly spread windows of
    ``data`` (every one if fewer): training's quick, repeatable estimate
    (:func:`bpe.data.reading.eval_windows`). :func:`bits_per_byte` is the
    exact figure on the whole text."""
    torch = require_torch()
    import numpy as np

    T = model.cfg.block_size
    device = next(model.parameters()).device
    starts = eval_windows(data, T, max_windows)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for i in range(0, len(starts), batch_size):
                rows = np.stack([np.asarray(data[s : s + T + 1], dtype=np.int64) for s in starts[i : i + batch_size]])
                xy = torch.from_numpy(rows).to(device)  # (b, T + 1)
                with autocast(device):
                    _, loss = model(xy[:, :-1], xy[:, 1:])
                total += loss.item() * xy[:, 1:].numel()
                count += xy[:, 1:].numel()
    finally:
        model.train(was_training)
    return total / count


def evaluate(checkpoint: str | os.PathLike, files: Iterable[str | os.PathLike] | None = None, *,
             data: str | os.PathLike | None = None, split: str = "val", tokenizer: Any = None,
             stride: int | None = None, batch_size: int = 32, limit: int | None = None,
             device: Any = "auto") -> dict:
    """Evaluation only: bits per byte of a checkpoint's model on the whole
    of ``files`` (UTF-8 text, each a document, compressed or not; ``limit``:
    the first ``limit`` bytes of each), or on the ``split`` of the token
    dataset ``data`` (``bpe encode --out DIR``). ``tokenizer`` is needed
    only for a checkpoint that does not carry its own. The result is
    :func:`bits_per_byte`'s, with ``checkpoint`` and what was read."""
    from bpe.data.dataset import tokenizer_sha256
    from bpe.data.reading import load_meta, load_split
    from bpe.gpt.checkpoint import load_model
    from bpe.inspect.compare import read_corpus

    if (files is None) == (data is None):
        raise ValueError("give the text to evaluate on: files (UTF-8 text files) or data (a dataset directory), "
                         "one of the two")
    model, tok, _ = load_model(checkpoint, tokenizer=tokenizer, device=device)
    if data is not None:
        meta = load_meta(data)
        if meta["tokenizer"]["sha256"] != tokenizer_sha256(tok):
            raise ValueError(f"{os.fspath(data)} was encoded with another tokenizer "
                             f"({meta['tokenizer']['file']}) than the model's; evaluate on text files instead")
        ids, source = load_split(data, split), {"data": os.fspath(data), "split": split}
    else:
        if isinstance(files, (str, os.PathLike)):
            files = [files]
        paths = [os.fspath(f) for f in files]
        if not paths:
            raise ValueError("files is empty; give at least one text file")
        ids = encode_documents(tok, [read_corpus(p, limit) for p in paths])
        source = {"files": paths}
    if len(ids) < 2:
        raise ValueError("the text has fewer than 2 tokens: nothing to predict; give more text")
    result = bits_per_byte(model, ids, token_byte_lengths(tok), stride=stride, batch_size=batch_size)
    return {"checkpoint": os.fspath(checkpoint), **source, **result}
