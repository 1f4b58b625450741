"""A small GPT that reads a bpe tokenizer's ids (``model.py``, PyTorch), and
its training loop, checkpoints and sampling (``train.py``). torch and numpy
are the ``model`` extra (``pip install 'bpe[model]'``), imported only when
used.
"""

__all__: list[str] = []
