"""A small GPT that reads the ids of a bpe Tokenizer. One file, PyTorch only.

    ids (B, T) -> token embedding + position embedding
               -> n_layer x [x + attn(LN(x)), then x + mlp(LN(x))]
               -> LN -> logits (B, T, vocab) through the token embedding again

Shapes in comments use B batch, T sequence length (at most block_size),
C = n_embd, H = n_head, D = C // H (one head's width), V = padded vocab size,
P = positions already in a :class:`KVCache`.

Sampling keeps each layer's keys and values in a :class:`KVCache`, so each new
token costs one position's work, not the whole context's; the samples are the
same as without it (``cache=False``).

Needs torch (``pip install -e '.[model]'``); ``import bpe`` never imports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F


def padded_vocab_size(n_vocab: int, multiple: int = 64) -> int:
    """``n_vocab`` rounded up to a multiple of 64: matrix shapes that are
    multiples of 64 map onto GPU tensor cores and CPU SIMD lanes without
    ragged edges. The extra rows are never targets, so training pushes their
    logits down; :meth:`GPT.generate` also masks them so they are never sampled."""
    return -(-n_vocab // multiple) * multiple


@dataclass
class GPTConfig:
    n_vocab: int  # the tokenizer's vocabulary (Tokenizer.n_vocab); ids are 0..n_vocab-1
    block_size: int = 128  # the longest context the model sees (position embeddings)
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128

    @property
    def vocab_size(self) -> int:
        """Rows of the embedding / columns of the logits (padded, see above)."""
        return padded_vocab_size(self.n_vocab)

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head}): "
                f"each head gets n_embd / n_head channels"
            )
        for name in ("n_vocab", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)  # all heads' q, k, v in one matmul
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)  # mixes the heads back together

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        # Each head attends on its own D = C / H channels.
        q = q.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, D)
        v = v.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, D)
        past = 0
        if cache is not None:
            past = cache.pos
            k, v = cache.store(layer, k, v)  # (B, H, P + T, D) each: the past positions, then these
        if past == 0:
            # is_causal: position t sees positions 0..t only, so a model trained to
            # predict token t+1 cannot peek at it. PyTorch picks a fused kernel
            # (flash / memory-efficient) where it can; none builds a (T, T) mask.
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        elif T == 1:
            # One new position after P cached ones: it sees all of them.
            y = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, D)
        else:
            # T new positions after P cached ones: new position i sees 0..P+i.
            seen = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(diagonal=past)  # (T, P + T)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=seen)  # (B, H, T, D)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.up = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.down = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


class Block(nn.Module):
    """Pre-norm: normalise the input of each sub-layer, not the residual
    stream itself, so the stream is a plain sum that gradients flow through
    unchanged from the loss to the first layer (this is why deep pre-norm
    stacks train without a careful warm-up of each layer)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache, layer)  # (B, T, C): tokens exchange information
        x = x + self.mlp(self.ln2(x))  # (B, T, C): each token computes on its own
        return x


class KVCache:
    """The keys and values of the positions a sampler has already run, per
    layer, in buffers of ``block_size`` positions: (n_layer, B, H,
    block_size, D) each, made at the first store in the dtype the model
    computes in (bf16 under autocast). :meth:`GPT.forward` with ``cache=``
    runs only the new positions, stores their keys and values, and attends
    over all."""

    def __init__(self, cfg: GPTConfig):
        self.cfg = cfg
        self.k: torch.Tensor | None = None  # (L, B, H, block_size, D)
        self.v: torch.Tensor | None = None  # (L, B, H, block_size, D)
        self.pos = 0  # positions stored so far (P)

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Puts ``k``, ``v`` (B, H, T, D) at positions P..P+T-1 of ``layer``;
        returns that layer's keys and values of positions 0..P+T-1. The last
        layer's call moves P on by T."""
        B, H, T, D = k.shape
        if self.k is None:
            shape = (self.cfg.n_layer, B, H, self.cfg.block_size, D)
            self.k = torch.zeros(shape, dtype=k.dtype, device=k.device)
            self.v = torch.zeros(shape, dtype=v.dtype, device=v.device)
        end = self.pos + T
        self.k[layer, :, :, self.pos : end] = k
        self.v[layer, :, :, self.pos : end] = v
        if layer == self.cfg.n_layer - 1:
            self.pos = end
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]  # (B, H, P + T, D) each


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)  # (V, C)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)  # (block_size, C)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        # The head reads the final state back into token space with the same
        # matrix that embedded tokens (weight tying): a token's input and
        # output vectors are learned together, and V x C parameters are saved
        # (most of a small model's parameters are in this matrix).
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init)
        # Every block adds two outputs (attn.proj, mlp.down) to the residual
        # stream; scaling their initial weights by 1/sqrt(2 * n_layer) keeps
        # the stream's variance at the start independent of depth.
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.down.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        # Small normal weights (std 0.02, as GPT-2), zero biases: at the start
        # every token's logits are nearly equal, so the loss is about
        # ln(vocab), and nothing saturates.
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def n_params(self) -> int:
        """Parameters, counting the tied embedding once (parameters() does)."""
        return sum(p.numel() for p in self.parameters())

    def n_embedding_params(self) -> int:
        """The embedding tables: tokens (V x C, also the output layer, tied)
        and positions (block_size x C). The rest, :meth:`n_params` minus
        these, is the non-embedding size, the same for every vocabulary."""
        return self.tok_emb.weight.numel() + self.pos_emb.weight.numel()

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``idx`` (B, T) int64 ids -> ``(logits (B, T, V), loss)``; ``loss``
        is the mean cross-entropy in nats/token against ``targets`` (B, T), or
        None without targets. With ``cache``, ``idx`` holds the positions
        after the P the cache already has (see :class:`KVCache`)."""
        B, T = idx.shape
        past = cache.pos if cache is not None else 0
        if past + T > self.cfg.block_size:
            raise ValueError(
                f"sequence of {past + T} tokens is longer than block_size {self.cfg.block_size}; "
                f"crop the context to the last {self.cfg.block_size} tokens"
            )
        pos = torch.arange(past, past + T, device=idx.device)  # (T,)
        x = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, C) + (T, C) broadcast -> (B, T, C)
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)  # (B, T, C)
        x = self.ln_f(x)  # (B, T, C)
        logits = self.lm_head(x)  # (B, T, V)
        if targets is None:
            return logits, None
        # Cross-entropy in float32 even under bf16 autocast: the log-softmax
        # over V classes loses too much in 8 bits of mantissa.
        loss = F.cross_entropy(logits.float().reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        *,
        generator: torch.Generator | None = None,
        cache: bool = True,
    ) -> torch.Tensor:
        """Extends ``idx`` (B, T) by ``max_new_tokens`` sampled ids -> (B, T + new).

        ``temperature`` divides the logits (below 1: safer, above 1: wilder;
        0: always the most likely token); ``top_k`` samples only among the k
        most likely tokens. Pass ``generator`` for reproducible samples.
        ``cache`` (see :meth:`sample_ids`) changes the speed, not the samples.
        (The arguments are checked by :meth:`sample_ids`, on its first step.)"""
        for next_id in self.sample_ids(idx, max_new_tokens, temperature, top_k, generator=generator, cache=cache):
            idx = torch.cat([idx, next_id.to(idx.device)], dim=1)  # (B, T + 1)
        return idx

    @torch.no_grad()  # (on a generator, torch restores grad mode around each step)
    def sample_ids(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        *,
        generator: torch.Generator | None = None,
        cache: bool = True,
    ) -> Iterator[torch.Tensor]:
        """:meth:`generate` one step at a time: yields each sampled (B, 1)
        id as soon as it is drawn, so a caller can show text as it comes.

        With ``cache`` (the default) the context runs once and each new
        token then costs one position (:class:`KVCache`), for as long as the
        whole sequence fits in ``block_size``. Past that, the context is the
        last ``block_size`` tokens, whose positions move at every step, so
        each step runs the whole window, as without the cache. Either way
        every step sees the same context with the same positions, so the
        samples are those of ``cache=False`` (the logits agree to rounding)."""
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        was_training = self.training
        self.eval()
        kv = KVCache(self.cfg) if cache else None
        try:
            for _ in range(max_new_tokens):
                if kv is not None and idx.shape[1] <= self.cfg.block_size:
                    # Only the positions the cache has not seen: all of idx at first, then the last id.
                    logits, _ = self(idx[:, kv.pos :], cache=kv)  # (B, T - P, V)
                else:
                    context = idx[:, -self.cfg.block_size :]  # (B, <=block_size): older tokens fall off
                    logits, _ = self(context)  # (B, T', V)
                logits = logits[:, -1, :].float()  # (B, V): only the next token's distribution
                # Padding ids are not tokens: never sample them.
                logits[:, self.cfg.n_vocab :] = float("-inf")
                if temperature == 0:
                    next_id = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
                else:
                    logits = logits / temperature
                    if top_k is not None:
                        kth = torch.topk(logits, min(top_k, self.cfg.n_vocab), dim=-1).values[:, -1:]  # (B, 1)
                        logits = logits.masked_fill(logits < kth, float("-inf"))
                    probs = F.softmax(logits, dim=-1)  # (B, V)
                    next_id = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
                idx = torch.cat([idx, next_id.to(idx.device)], dim=1)  # (B, T + 1)
                yield next_id
        finally:
            self.train(was_training)


def generate_text(
    model: GPT,
    tokenizer,
    prompt: str,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    *,
    generator: torch.Generator | None = None,
    cache: bool = True,
) -> str:
    """``prompt`` and its sampled continuation as a ``str``: the pieces of
    :func:`stream_text`, joined."""
    return "".join(stream_text(model, tokenizer, prompt, max_new_tokens, temperature, top_k, generator=generator,
                               cache=cache))


def stream_text(
    model: GPT,
    tokenizer,
    prompt: str,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    *,
    generator: torch.Generator | None = None,
    cache: bool = True,
) -> Iterator[str]:
    """``prompt`` and its sampled continuation, as pieces of text yielded as
    the tokens are sampled (the prompt first).

    The ids go through the tokenizer's streaming decoder (``errors="replace"``):
    a token that ends mid-character yields nothing until the character is
    complete, and the pieces join to ``decode(all ids)`` exactly; a model
    that stops mid-character (or makes bytes that are not UTF-8 at all)
    gives U+FFFD, never an exception. An empty prompt starts from
    ``<|endoftext|>``, the token that begins every document after the first,
    and which is not part of the text."""
    device = next(model.parameters()).device
    if prompt:
        ids = tokenizer.encode(prompt, allowed_special="all")
    else:
        eot = tokenizer.special_tokens.get("<|endoftext|>")
        if eot is None:
            raise ValueError("the tokenizer has no <|endoftext|> token to start from; give a prompt")
        ids = [eot]
    dec = tokenizer.decoder(errors="replace")
    if prompt and (piece := dec.feed(ids)):
        yield piece
    idx = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)
    for next_id in model.sample_ids(idx, max_new_tokens, temperature, top_k, generator=generator, cache=cache):
        if piece := dec.feed(next_id.item()):
            yield piece
    if rest := dec.flush():
        yield rest
