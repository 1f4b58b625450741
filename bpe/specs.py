"""Any tokenizer by what a user types after ``-t`` (made by the class given:
``bpe.named`` binds it to :class:`bpe.Tokenizer`; the Tokenizer's own methods,
which ``bpe.named`` cannot be imported by, pass their class): one of our ``.bpe`` files,
a ``.tiktoken`` rank file, a HuggingFace ``tokenizer.json``, or the name of
one of OpenAI's encodings (``gpt2``, ``r50k``, ``cl100k``, ``o200k``).

A name is loaded through tiktoken (which reads ``TIKTOKEN_CACHE_DIR`` or
downloads the rank file once). A ``.tiktoken`` file holds only ranks, not the
split pattern or the special tokens: for OpenAI's four files those are known
(``KNOWN`` below, checked against tiktoken by the tests), recognised by the
file's name or else by its number of ranks. (``p50k_base``, Codex's, is left
out: no test vocabulary here has it, so its entry could not be checked.)
"""

from __future__ import annotations

import os

from bpe.fileformat import TokenizerFileError, parse_tiktoken_lines
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN

#: OpenAI's encodings: (split pattern, special tokens, number of ranks).
KNOWN = {
    "r50k_base": (GPT2_PATTERN, {"<|endoftext|>": 50256}, 50256),
    "cl100k_base": (
        GPT4_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        100256,
    ),
    "o200k_base": (GPT4O_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}, 199998),
}

#: The short names a user may type, and the encoding each means (tiktoken's
#: "gpt2" is r50k_base's ranks).
NAMES = {
    "gpt2": "r50k_base",
    "r50k": "r50k_base",
    "cl100k": "cl100k_base",
    "o200k": "o200k_base",
    **{name: name for name in KNOWN},
}


def load_spec(cls, spec: str):
    """The tokenizer ``spec`` names: a file (by its content: our format, a
    ``tokenizer.json``, or ``.tiktoken`` ranks) or an encoding name."""
    if os.path.isdir(spec):
        raise TokenizerFileError(f"{spec} is a directory; give a tokenizer file or a name such as cl100k")
    if not os.path.exists(spec):
        if spec in NAMES:
            return _by_name(cls, NAMES[spec])
        raise TokenizerFileError(
            f"{spec}: no such file, and not an encoding name ({', '.join(sorted(n for n in NAMES if '_' not in n))}); "
            f"give a .bpe, .tiktoken or tokenizer.json file, or one of those names"
        )
    with open(spec, "rb") as f:
        head = f.read(4096).lstrip()
    if head.startswith(b"{"):
        return cls.from_huggingface(spec)
    if spec.endswith(".tiktoken") or _looks_like_ranks(head):
        return _tiktoken_file(cls, spec)
    return cls.load(spec)


def _looks_like_ranks(head: bytes) -> bool:
    # A .tiktoken file starts "IQ== 0" (the base64 of byte 0, rank 0).
    first = head.split(b"\n", 1)[0].split()
    return len(first) == 2 and first[1] == b"0" and first[0].endswith(b"=")


def _by_name(cls, name: str):
    try:
        import tiktoken
    except ImportError:
        raise TokenizerFileError(
            f"loading {name} by name needs tiktoken: pip install 'bpe[tiktoken]' (or give its .tiktoken file)"
        ) from None
    try:
        return cls.from_tiktoken(tiktoken.get_encoding(name))
    except Exception as e:  # a download that failed, a damaged cache file
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TokenizerFileError(
            f"cannot load {name} through tiktoken: {first}; without internet access, put its rank file in "
            f"TIKTOKEN_CACHE_DIR or give the .tiktoken file itself"
        ) from None


def _tiktoken_file(cls, path: str):
    stem = os.path.basename(path).split(".")[0]
    with open(path, "rb") as f:
        try:
            ranks = parse_tiktoken_lines(f.read().splitlines(), name=path)
        except ValueError as e:
            raise TokenizerFileError(str(e)) from None
    known = KNOWN.get(NAMES.get(stem, "")) or next((k for k in KNOWN.values() if k[2] == len(ranks)), None)
    if known is None:
        raise TokenizerFileError(
            f"{path} holds {len(ranks):,} token ranks but no split pattern, and it is not one of OpenAI's "
            f"encodings; load it in Python: Tokenizer.from_tiktoken(path, pattern=...)"
        )
    pattern, specials, _ = known
    return cls.from_tiktoken(path, pattern=pattern, special_tokens=specials)
