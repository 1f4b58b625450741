"""A small GPT that reads a bpe tokenizer's ids, and what it is for: judging
tokenizers by the model they feed.

- ``model.py``: the GPT (PyTorch), with a KV cache for sampling;
- ``train.py``: ``bpe.gpt.train.train`` on a token dataset (``bpe gpt train``);
- ``evaluation.py``: :func:`bits_per_byte` on a whole text, :func:`evaluate`
  from a checkpoint (``bpe gpt eval``);
- ``sampling.py``: :func:`sample` from a checkpoint (``bpe gpt sample``);
- ``checkpoint.py``: checkpoints that carry their tokenizer;
- ``comparison.py``: :func:`compare`, tokenizers at equal compute (``bpe gpt compare``);
- ``report.py``: its progress bar, table and plot; ``runtime.py``: devices, seeds.

torch and numpy are the ``model`` extra (``pip install 'bpe[model]'``),
imported only when a function runs: ``import bpe.gpt`` does not import them.
"""

from __future__ import annotations

from bpe.gpt.checkpoint import load_checkpoint, load_model, save_checkpoint
from bpe.gpt.comparison import compare
from bpe.gpt.evaluation import bits_per_byte, evaluate
from bpe.gpt.sampling import sample

# (The training function is bpe.gpt.train.train: `train` here is its module.)
__all__ = ["bits_per_byte", "compare", "evaluate", "load_checkpoint", "load_model", "sample", "save_checkpoint"]
