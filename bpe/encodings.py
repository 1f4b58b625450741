"""Encodings by name, as tiktoken's module functions give them:
``get_encoding``, ``encoding_for_model``, ``encoding_name_for_model``,
``list_encoding_names``, and :class:`Encoding`, tiktoken's constructor.

OpenAI's encodings (``bpe/formats/openai.py``) are read from tiktoken's
cache without tiktoken; one's own are added with :func:`register_encoding`.
An encoding is made once per process and shared, as tiktoken does.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

from bpe.formats import openai
from bpe.tokenizer import Tokenizer

__all__ = ["Encoding", "encoding_for_model", "encoding_name_for_model", "get_encoding", "list_encoding_names",
           "register_encoding"]


class Encoding(Tokenizer):
    """tiktoken's ``Encoding(name, *, pat_str, mergeable_ranks,
    special_tokens, explicit_n_vocab=None)``: a :class:`bpe.Tokenizer` made
    from ranks, with tiktoken's constructor, name and ``repr``.

    ``mergeable_ranks``: ``{token bytes: rank}`` (ids are the ranks; lower
    merges first), ``special_tokens``: ``{text: id}``, ``pat_str``: the
    split regex. ``explicit_n_vocab``, when given, must be the number of
    tokens and one more than the largest id (``ValueError`` otherwise)."""

    def __init__(self, name: str, *, pat_str: str, mergeable_ranks: Mapping[bytes, int],
                 special_tokens: Mapping[str, int], explicit_n_vocab: int | None = None):
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        super().__init__(pattern=pat_str, special_tokens=dict(special_tokens), ranks=dict(mergeable_ranks))
        self._name = name
        if explicit_n_vocab:
            count = len(mergeable_ranks) + len(special_tokens)
            if count != explicit_n_vocab or self.max_token_value != explicit_n_vocab - 1:
                raise ValueError(f"explicit_n_vocab is {explicit_n_vocab}, but the encoding has {count} tokens and "
                                 f"its largest id is {self.max_token_value}")

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    def __reduce__(self):
        # A registered encoding pickles as its name (the other process reads
        # it from its own cache), as tiktoken's does; any other whole.
        if _ENCODINGS.get(self.name) is self:
            return (get_encoding, (self.name,))
        return (_encoding, (self.name, self.pattern, self._ranks(), dict(self.special_tokens)))


def _encoding(name, pattern, ranks, special_tokens) -> Encoding:
    return Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special_tokens)


# -- the registry ----------------------------------------------------------------

_lock = threading.RLock()
_ENCODINGS: dict[str, Tokenizer] = {}
_CONSTRUCTORS: dict[str, Callable[[], Any]] = {}


def _openai(spec: openai.OpenAIEncoding) -> Callable[[], Encoding]:
    def make() -> Encoding:
        return Encoding(spec.name, pat_str=spec.pattern, mergeable_ranks=openai.load_ranks(spec),
                        special_tokens=spec.special_tokens, explicit_n_vocab=spec.n_vocab)

    return make


for _spec in openai.ENCODINGS.values():
    _CONSTRUCTORS[_spec.name] = _openai(_spec)


def register_encoding(name: str, constructor: Callable[[], Any]) -> None:
    """Makes ``get_encoding(name)`` work for one's own encoding.
    ``constructor()`` is called once, on first use, and returns a
    :class:`bpe.Tokenizer` (for instance ``Tokenizer.load("mine.bpe")``) or,
    as tiktoken's plugins do, the keyword arguments of :class:`Encoding`
    (``name``, ``pat_str``, ``mergeable_ranks``, ``special_tokens``). A name
    already known is a ``ValueError``."""
    if not isinstance(name, str) or not callable(constructor):
        raise TypeError("register_encoding(name, constructor): a str and a function that makes the encoding")
    with _lock:
        if name in _CONSTRUCTORS:
            raise ValueError(f"an encoding named {name!r} is already registered")
        _CONSTRUCTORS[name] = constructor


def get_encoding(encoding_name: str) -> Tokenizer:
    """The encoding called ``encoding_name`` (``"cl100k_base"``,
    ``"o200k_base"``, ... or a registered one), made once per process.
    ``ValueError`` for a name nobody registered (as tiktoken);
    ``FileNotFoundError`` naming the file when an OpenAI rank file is
    neither in tiktoken's cache nor fetchable."""
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    enc = _ENCODINGS.get(encoding_name)
    if enc is not None:
        return enc
    with _lock:
        enc = _ENCODINGS.get(encoding_name)
        if enc is not None:
            return enc
        if encoding_name not in _CONSTRUCTORS:
            raise ValueError(f"Unknown encoding {encoding_name}: bpe knows {', '.join(list_encoding_names())}; "
                             f"add one with bpe.register_encoding")
        made = _CONSTRUCTORS[encoding_name]()
        if isinstance(made, Mapping):
            made = Encoding(**made)
        if not isinstance(made, Tokenizer):
            raise TypeError(f"the constructor of {encoding_name!r} returned {type(made).__name__}, not a Tokenizer "
                            f"or the keyword arguments of bpe.Encoding")
        if made.__dict__.get("_name") is None:
            made.name = encoding_name
        _ENCODINGS[encoding_name] = made
        return made


def list_encoding_names() -> list[str]:
    """The names :func:`get_encoding` knows."""
    with _lock:
        return list(_CONSTRUCTORS)


# -- models ------------------------------------------------------------------------

#: Which encoding each of OpenAI's models uses (the table tiktoken keeps).
MODEL_TO_ENCODING: dict[str, str] = {
    **dict.fromkeys(["o1", "o3", "o4-mini", "gpt-5", "gpt-4.1", "gpt-4o"], "o200k_base"),
    **dict.fromkeys(["gpt-4", "gpt-3.5-turbo", "gpt-3.5", "gpt-35-turbo", "davinci-002", "babbage-002",
                     "text-embedding-ada-002", "text-embedding-3-small", "text-embedding-3-large"], "cl100k_base"),
    **dict.fromkeys(["text-davinci-003", "text-davinci-002", "code-davinci-002", "code-davinci-001",
                     "code-cushman-002", "code-cushman-001", "davinci-codex", "cushman-codex"], "p50k_base"),
    **dict.fromkeys(["text-davinci-edit-001", "code-davinci-edit-001"], "p50k_edit"),
    **dict.fromkeys(["text-davinci-001", "text-curie-001", "text-babbage-001", "text-ada-001", "davinci", "curie",
                     "babbage", "ada", "text-similarity-davinci-001", "text-similarity-curie-001",
                     "text-similarity-babbage-001", "text-similarity-ada-001", "text-search-davinci-doc-001",
                     "text-search-curie-doc-001", "text-search-babbage-doc-001", "text-search-ada-doc-001",
                     "code-search-babbage-code-001", "code-search-ada-code-001"], "r50k_base"),
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}

#: Model names by prefix (a dated or fine-tuned model: "gpt-4o-2024-05-13"),
#: tried in this order after an exact match.
MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    **dict.fromkeys(["o1-", "o3-", "o4-mini-", "gpt-5", "gpt-4.5-", "gpt-4.1-", "chatgpt-4o-", "gpt-4o-"],
                    "o200k_base"),
    **dict.fromkeys(["gpt-4-", "gpt-3.5-turbo-", "gpt-35-turbo-"], "cl100k_base"),
    "gpt-oss-": "o200k_harmony",
    "ft:gpt-4o": "o200k_base",
    **dict.fromkeys(["ft:gpt-4", "ft:gpt-3.5-turbo", "ft:davinci-002", "ft:babbage-002"], "cl100k_base"),
}


def encoding_name_for_model(model_name: str) -> str:
    """The name of the encoding ``model_name`` uses; ``KeyError`` for a
    model nobody mapped (as tiktoken)."""
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return name
    raise KeyError(f"Could not automatically map {model_name} to a tokeniser. "
                   "Please use `bpe.get_encoding` to explicitly get the tokeniser you expect.")


def encoding_for_model(model_name: str) -> Tokenizer:
    """The encoding ``model_name`` uses (``get_encoding`` of its name)."""
    return get_encoding(encoding_name_for_model(model_name))
