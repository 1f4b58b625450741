"""bpe: byte-level BPE tokenization with a Rust core.

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer.train(Path("corpus.txt"), vocab_size=4096)
    >>> tok.decode(tok.encode("hello world"))
    'hello world'
"""

try:
    from bpe._core import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN
except ModuleNotFoundError as e:  # pragma: no cover - depends on how it was installed
    if e.name != "bpe._core":
        raise
    import os as _os

    raise ImportError(
        f"bpe's compiled Rust core is missing from {_os.path.dirname(__file__)}. This usually "
        "means Python imported the source tree (you are inside the repository) instead of the "
        "installed package: run `pip install -e .` here, or run Python from another directory."
    ) from None
from bpe.fileformat import TokenizerFileError
from bpe.patterns import PATTERNS, pretokenize, resolve_pattern
from bpe.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer

__all__ = [
    "ENDOFTEXT",
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "GPT4O_PATTERN",
    "PATTERNS",
    "Tokenizer",
    "TokenizerFileError",
    "pretokenize",
    "resolve_pattern",
]
__version__ = "0.1.0"
