"""bpe: byte-level BPE tokenization with a Rust core.

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer.train(Path("corpus.txt"), vocab_size=4096)
    >>> tok.decode(tok.encode("hello world"))
    'hello world'
"""

from bpe._core import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN
from bpe.tokenizer import (
    ENDOFTEXT,
    PATTERNS,
    Tokenizer,
    TokenizerFileError,
    pretokenize,
    resolve_pattern,
)

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
