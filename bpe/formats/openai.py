"""OpenAI's encodings: what each is (split pattern, special tokens, rank
file) and where its rank file is read from.

The rank files are the ones tiktoken uses, read from **tiktoken's own
cache**: the directory ``TIKTOKEN_CACHE_DIR`` names (or ``DATA_GYM_CACHE_DIR``,
or ``<tmp>/data-gym-cache``), where a file is named by the sha1 of its URL.
Each file is checked against the sha256 tiktoken checks. A file not there is
fetched only as tiktoken itself would fetch it: through tiktoken, when it is
installed (and a network is there), which also puts it in that cache.
Otherwise a one-line error names the file and where to put it.

The patterns and special tokens are those of tiktoken's ``openai_public``
definitions (the tests compare every field with tiktoken's own encodings).
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from dataclasses import dataclass, field

from bpe._core import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN

__all__ = ["ENCODINGS", "OpenAIEncoding", "cache_dir", "cache_path", "load_ranks", "parse_ranks"]

_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
ENDOFTEXT = "<|endoftext|>"
_FIM = {"<|fim_prefix|>": 0, "<|fim_middle|>": 1, "<|fim_suffix|>": 2}


@dataclass(frozen=True)
class OpenAIEncoding:
    """One of OpenAI's encodings: its rank file (``file``, checked by
    ``sha256``, holding ``n_ranks`` ranks), split pattern and special tokens;
    ``n_vocab`` when tiktoken states it (``explicit_n_vocab``)."""

    name: str
    file: str
    sha256: str
    n_ranks: int
    pattern: str
    special_tokens: dict = field(default_factory=dict)
    n_vocab: int | None = None

    @property
    def url(self) -> str:
        return _URL.format(self.file)


def _harmony_specials() -> dict[str, int]:
    named = {"<|startoftext|>": 199998, ENDOFTEXT: 199999, "<|return|>": 200002, "<|constrain|>": 200003,
             "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008,
             "<|call|>": 200012}
    reserved = {f"<|reserved_{i}|>": i for i in (200000, 200001, 200004, 200009, 200010, 200011)}
    more = {f"<|reserved_{i}|>": i for i in range(200013, 201088)}
    # Insertion order as tiktoken's dict has it: o200k_base's, then these by id.
    ordered = {ENDOFTEXT: 199999, "<|endofprompt|>": 200018}
    for token, i in sorted({**named, **reserved}.items(), key=lambda kv: kv[1]):
        ordered.setdefault(token, i)
    return {**ordered, **more}


# (file, its sha256, the ranks it holds)
_R50K = ("r50k_base", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", 50256)
_P50K = ("p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069", 50280)
_CL100K = ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", 100256)
_O200K = ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", 199998)

#: By name, in tiktoken's order. ``gpt2`` has r50k_base's ranks (tiktoken
#: builds them from GPT-2's original vocab.bpe and encoder.json; they are
#: the same ranks, and the r50k_base file is read for both).
ENCODINGS: dict[str, OpenAIEncoding] = {
    e.name: e
    for e in [
        OpenAIEncoding("gpt2", *_R50K, GPT2_PATTERN, {ENDOFTEXT: 50256}, 50257),
        OpenAIEncoding("r50k_base", *_R50K, GPT2_PATTERN, {ENDOFTEXT: 50256}, 50257),
        OpenAIEncoding("p50k_base", *_P50K, GPT2_PATTERN, {ENDOFTEXT: 50256}, 50281),
        OpenAIEncoding("p50k_edit", *_P50K, GPT2_PATTERN,
                       {ENDOFTEXT: 50256, **{t: 50281 + k for t, k in _FIM.items()}}),
        OpenAIEncoding("cl100k_base", *_CL100K, GPT4_PATTERN,
                       {ENDOFTEXT: 100257, **{t: 100258 + k for t, k in _FIM.items()}, "<|endofprompt|>": 100276}),
        OpenAIEncoding("o200k_base", *_O200K, GPT4O_PATTERN, {ENDOFTEXT: 199999, "<|endofprompt|>": 200018}),
        OpenAIEncoding("o200k_harmony", *_O200K, GPT4O_PATTERN, _harmony_specials()),
    ]
}


def cache_dir() -> str | None:
    """The directory tiktoken caches rank files in (None: caching is off,
    ``TIKTOKEN_CACHE_DIR=""``)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        d = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        d = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        d = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return d or None


def cache_path(enc: OpenAIEncoding) -> str | None:
    """Where tiktoken keeps ``enc``'s rank file: the sha1 of its URL."""
    d = cache_dir()
    return None if d is None else os.path.join(d, hashlib.sha1(enc.url.encode()).hexdigest())


def parse_ranks(data: bytes, name: str) -> dict[bytes, int]:
    """A ``.tiktoken`` file's ``base64-token rank`` lines as ``{bytes: rank}``;
    a ``ValueError`` naming the line otherwise."""
    ranks = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError:
            raise ValueError(f"{name}: line {number} is not 'base64-token rank': {line[:60]!r}") from None
    return ranks


def load_ranks(enc: OpenAIEncoding) -> dict[bytes, int]:
    """``enc``'s ranks from tiktoken's cache (checked by sha256), fetched
    through tiktoken when it is installed and the file is not there."""
    path = cache_path(enc)
    if path is not None and os.path.isfile(path):
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() == enc.sha256:
            return parse_ranks(data, path)
        problem = f"{path} (the cached {enc.file}.tiktoken) does not have the sha256 tiktoken expects"
    else:
        problem = f"{enc.file}.tiktoken is not in tiktoken's cache"
    try:
        from tiktoken.load import read_file_cached
    except ImportError:
        raise FileNotFoundError(_missing(enc, path, problem + ", and tiktoken, which would fetch it, "
                                                              "is not installed")) from None
    try:
        data = read_file_cached(enc.url, enc.sha256)
    except Exception as e:  # no network, a refused download, a full disk
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FileNotFoundError(_missing(enc, path, f"{problem}, and tiktoken could not fetch it ({first})")) from None
    return parse_ranks(data, enc.url)


def _missing(enc: OpenAIEncoding, path: str | None, problem: str) -> str:
    where = (f"save {enc.url} as {path}" if path is not None else
             f"set TIKTOKEN_CACHE_DIR to a directory and save {enc.url} there as "
             f"{hashlib.sha1(enc.url.encode()).hexdigest()}")
    return f"{enc.name}: {problem}; {where} (or set TIKTOKEN_CACHE_DIR to where it is)"
