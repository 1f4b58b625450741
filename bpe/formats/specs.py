"""Any tokenizer by what a user types after ``-t``, made by the class given
(``Tokenizer.from_name_or_path`` passes its own): one of our ``.bpe`` files,
a ``.tiktoken`` rank file, a HuggingFace ``tokenizer.json``, or the name of
one of OpenAI's encodings (``gpt2``, ``r50k``, ``cl100k``, ``o200k``).

A name is one of OpenAI's encodings, read from tiktoken's cache
(``bpe/formats/openai.py``). A ``.tiktoken`` file holds only ranks, not the
split pattern or the special tokens: for OpenAI's files those are known,
recognised by the file's name or else by its number of ranks.
"""

from __future__ import annotations

import os

from bpe.formats import openai
from bpe.formats.bpefile import TokenizerFileError, parse_tiktoken_lines

#: OpenAI's encodings that a bare rank file can be: (split pattern, special
#: tokens, number of ranks), by name.
KNOWN = {name: (e.pattern, dict(e.special_tokens), e.n_ranks) for name, e in openai.ENCODINGS.items()
         if name in ("r50k_base", "p50k_base", "cl100k_base", "o200k_base")}

#: The names a user may type, and the encoding each means.
NAMES = {
    "r50k": "r50k_base",
    "p50k": "p50k_base",
    "cl100k": "cl100k_base",
    "o200k": "o200k_base",
    **{name: name for name in openai.ENCODINGS},
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
        return cls.from_tiktoken(name)
    except FileNotFoundError as e:  # the message names the file and where to put it
        raise TokenizerFileError(str(e)) from None


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
