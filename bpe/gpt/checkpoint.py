"""Checkpoints: a model's weights with its settings and its tokenizer, in one
file (``torch.save`` of a dict, read back with ``weights_only=True``).

A checkpoint carries the tokenizer as the text of its ``.bpe`` file (key
``tokenizer``, with its sha256), so sampling and evaluation need nothing
else. Checkpoints written before that (no ``tokenizer`` key) still load when
the tokenizer is given. Written by ``bpe gpt train`` (with its optimizer and
batch generator, for ``--resume``) and by ``bpe gpt compare --save DIR``.
"""

from __future__ import annotations

import os
from typing import Any

from bpe._util.files import atomic_write, check_readable_file
from bpe.data.dataset import tokenizer_sha256
from bpe.gpt.runtime import require_torch, resolve_device
from bpe.tokenizer import Tokenizer

__all__ = ["CKPT_FORMAT", "load_checkpoint", "load_model", "save_checkpoint", "tokenizer_of"]

CKPT_FORMAT = "bpe-gpt v1"


def save_checkpoint(path: str | os.PathLike, state: dict, *, force: bool = False) -> None:
    """``torch.save`` to a temporary file beside ``path``, fsync, rename: a
    crash or Ctrl-C mid-save leaves the previous checkpoint, never half of
    one. ``state`` gets ``format`` added; a read-only file is replaced only
    with ``force``."""
    torch = require_torch()
    state = {"format": CKPT_FORMAT, **state}
    atomic_write(os.fspath(path), lambda f: torch.save(state, f), force=force)


def load_checkpoint(path: str | os.PathLike) -> dict:
    """The dict a checkpoint holds (tensors on the CPU). A file that is not
    a checkpoint raises ValueError saying so."""
    torch = require_torch()
    path = check_readable_file(path)
    try:
        # weights_only: a checkpoint is data (tensors, numbers, strings);
        # refusing pickled code makes loading someone else's file safe.
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a bad file
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(
            f"{path} is not a checkpoint written by `bpe gpt train` (torch.load: {detail}); "
            f"give the --out file of a training run"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CKPT_FORMAT:
        raise ValueError(f"{path} is not a {CKPT_FORMAT} checkpoint; train one with `bpe gpt train`")
    for key in ("model_config", "model"):
        if key not in ckpt:
            raise ValueError(f"{path} has no {key!r}: it is damaged or not a model checkpoint; train it again")
    return ckpt


def tokenizer_of(ckpt: dict, path: str | os.PathLike, tokenizer: Tokenizer | str | os.PathLike | None = None
                 ) -> Tokenizer:
    """The checkpoint's tokenizer: the one it carries, or ``tokenizer`` (a
    Tokenizer, a file or a name) for an older checkpoint that carries none.
    A given tokenizer must be the one the model was trained with (when the
    checkpoint records its sha256)."""
    path = os.fspath(path)
    given = None
    if tokenizer is not None:
        given = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.from_name_or_path(tokenizer)
        recorded = ckpt.get("tokenizer_sha256")
        if recorded is not None and tokenizer_sha256(given) != recorded:
            raise ValueError(f"{path} was trained with another tokenizer than the one given; "
                             f"leave the tokenizer out to use the one the checkpoint carries")
        return given
    text = ckpt.get("tokenizer")
    if text is None:
        raise ValueError(f"{path} carries no tokenizer (it was written by an older bpe); give the one it was "
                         f"trained with (-t TOK, or tokenizer=)")
    tok = Tokenizer._parse(text.encode("utf-8"), f"{path} (its embedded tokenizer)")
    tok.name = ckpt.get("tokenizer_name") or os.path.splitext(os.path.basename(path))[0]
    return tok


def load_model(checkpoint: str | os.PathLike | dict, *, tokenizer: Any = None, device: Any = "auto",
               path: str | None = None) -> tuple[Any, Tokenizer, dict]:
    """``(model, tokenizer, checkpoint dict)``: the GPT of a checkpoint file
    (or of a dict :func:`load_checkpoint` returned, then named by ``path``)
    on ``device``, in eval mode, with its tokenizer (see :func:`tokenizer_of`)."""
    require_torch()
    from bpe.gpt.model import GPT, GPTConfig

    if isinstance(checkpoint, dict):
        ckpt, path = checkpoint, path or "the checkpoint"
    elif isinstance(checkpoint, (str, os.PathLike)):
        ckpt, path = load_checkpoint(checkpoint), os.fspath(checkpoint)
    else:
        raise TypeError(f"checkpoint must be a path or a checkpoint dict, not {type(checkpoint).__name__}")
    tok = tokenizer_of(ckpt, path, tokenizer)
    cfg = GPTConfig(**ckpt["model_config"])
    if tok.n_vocab > cfg.n_vocab:
        raise ValueError(f"the tokenizer has {tok.n_vocab} ids but the model of {path} only {cfg.n_vocab}; "
                         f"give the tokenizer it was trained with")
    model = GPT(cfg)
    model.load_state_dict(ckpt["model"])
    model.to(resolve_device(device)).eval()
    return model, tok, ckpt
