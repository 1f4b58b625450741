"""Sampling text from a checkpoint (``bpe gpt sample``): the model and the
tokenizer it carries, a seeded generator, and the pieces of text as the
tokens are drawn (``bpe/gpt/model.py``'s :func:`~bpe.gpt.model.stream_text`,
with the KV cache).
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from bpe.gpt.runtime import require_torch

__all__ = ["sample"]


def sample(checkpoint: str | os.PathLike | dict, prompt: str = "", *, max_new_tokens: int = 200,
           temperature: float = 0.8, top_k: int | None = None, seed: int | None = None, tokenizer: Any = None,
           device: Any = "auto", cache: bool = True) -> Iterator[str]:
    """``prompt`` and ``max_new_tokens`` sampled tokens after it, as pieces of
    text yielded as they are drawn (whole characters; they join to the
    decoded ids). An empty prompt starts a document (``<|endoftext|>``).

    ``temperature`` divides the logits (0: always the likeliest token);
    ``top_k`` keeps only the k likeliest. ``seed`` makes the sample
    reproducible; ``cache`` (the KV cache) changes the speed, not the
    sample. ``tokenizer`` is needed only for a checkpoint written before
    checkpoints carried their tokenizer."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be a whole number, not {type(max_new_tokens).__name__}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must not be negative, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must not be negative, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    torch = require_torch()
    from bpe.gpt.checkpoint import load_model
    from bpe.gpt.model import stream_text

    model, tok, _ = load_model(checkpoint, tokenizer=tokenizer, device=device)
    device = next(model.parameters()).device
    generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    return stream_text(model, tok, prompt, max_new_tokens, temperature, top_k, generator=generator, cache=cache)
