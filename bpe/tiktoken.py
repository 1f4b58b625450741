"""A drop-in for the ``tiktoken`` module: ``import bpe.tiktoken as tiktoken``
makes a program written for tiktoken run on bpe, unchanged.

    >>> import bpe.tiktoken as tiktoken
    >>> enc = tiktoken.get_encoding("cl100k_base")
    >>> enc.decode(enc.encode("hello world"))
    'hello world'

The names are tiktoken's public ones; every ``Encoding`` method is there
with tiktoken's semantics (docs/tiktoken.md lists them, and where bpe
differs). OpenAI's rank files are read from tiktoken's cache.
"""

from bpe.encodings import Encoding, encoding_for_model, encoding_name_for_model, get_encoding, list_encoding_names

__all__ = ["Encoding", "encoding_for_model", "encoding_name_for_model", "get_encoding", "list_encoding_names"]
