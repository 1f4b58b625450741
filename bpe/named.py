"""Any tokenizer by what a user types after ``-t``: one of our ``.bpe`` files,
a ``.tiktoken`` rank file, a HuggingFace ``tokenizer.json``, or the name of
one of OpenAI's encodings (``gpt2``, ``r50k``, ``cl100k``, ``o200k``). The
rules live in ``bpe/specs.py``; this binds them to :class:`bpe.Tokenizer`.
"""

from __future__ import annotations

from bpe.specs import KNOWN, NAMES, _looks_like_ranks, load_spec
from bpe.tokenizer import Tokenizer

__all__ = ["KNOWN", "NAMES", "load_tokenizer", "_looks_like_ranks"]


def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer ``spec`` names: a file (by its content: our format, a
    ``tokenizer.json``, or ``.tiktoken`` ranks) or an encoding name."""
    return load_spec(Tokenizer, spec)
