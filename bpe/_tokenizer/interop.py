"""Interchange with tiktoken and HuggingFace: the methods of
:class:`bpe.Tokenizer` that read and write the other libraries' objects and
files. Each one converts the four fields (ranks/merges, pattern, special
tokens) and nothing else; the exactness checks live in the tests
(tests/test_interop.py).
"""

from __future__ import annotations

import os
from typing import TypeVar

from bpe.formats.bpefile import TokenizerFileError, parse_tiktoken_lines, read_file, tiktoken_lines
from bpe._tokenizer.picky import refuse
from bpe._tokenizer.superbpe import refuse as refuse_superbpe
from bpe._util.files import PathLike, atomic_write_text
from bpe.formats import openai
from bpe.formats.specs import load_spec

# The Tokenizer class these methods are mixed into (this module cannot
# import bpe.tokenizer, which imports it).
T = TypeVar("T", bound="Interop")


class Interop:
    """Mixed into :class:`bpe.Tokenizer`; ``cls(...)`` is the Tokenizer."""

    @classmethod
    def from_name_or_path(cls: type[T], spec: str | PathLike) -> T:
        """The tokenizer ``spec`` names, as the command line's ``-t`` reads
        it: a file, told by its content (our ``.bpe`` format, a HuggingFace
        ``tokenizer.json``, ``.tiktoken`` ranks), or the name of one of
        OpenAI's encodings (``gpt2``, ``r50k``, ``cl100k``, ``o200k``, or
        their full names)."""
        return load_spec(cls, os.fspath(spec))

    # -- tiktoken interop ---------------------------------------------------

    @classmethod
    def from_tiktoken(
        cls: type[T],
        src,
        *,
        pattern: str | None = None,
        special_tokens: dict[str, int] | None = None,
    ) -> T:
        """A Tokenizer with a tiktoken vocabulary; encodes id for id as tiktoken.

        ``src`` is one of:
          * a ``tiktoken.Encoding``;
          * the name of one of OpenAI's encodings (``"r50k_base"``, ``"gpt2"``,
            ``"p50k_base"``, ``"cl100k_base"``, ``"o200k_base"``, ...), its rank
            file read from tiktoken's cache (``bpe/formats/openai.py``);
          * a path to a ``.tiktoken`` rank file: then ``pattern=`` is required
            (a rank file has none) and ``special_tokens=`` is optional.
        ``pattern``/``special_tokens`` override the encoding's own.
        """
        if isinstance(src, os.PathLike) or (
            isinstance(src, str) and (os.sep in src or src.endswith(".tiktoken") or os.path.isfile(src))
        ):
            if pattern is None:
                raise ValueError(
                    f"{os.fsdecode(src)} holds only token ranks; pass pattern= too "
                    f"(e.g. pattern='gpt4' for cl100k_base, 'gpt4o' for o200k_base, 'gpt2' for r50k_base)"
                )
            raw, name = read_file(src, ".tiktoken rank file")
            try:
                ranks = parse_tiktoken_lines(raw.splitlines(), name=name)
            except ValueError as e:  # the message names the file and line
                raise TokenizerFileError(str(e)) from None
            return cls(pattern=pattern, special_tokens=special_tokens or {}, ranks=ranks)
        if isinstance(src, str):
            if src not in openai.ENCODINGS:
                raise ValueError(f"{src!r} is not one of OpenAI's encodings ({', '.join(openai.ENCODINGS)}), "
                                 f"nor a .tiktoken file")
            spec = openai.ENCODINGS[src]
            tok = cls(pattern=spec.pattern if pattern is None else pattern,
                      special_tokens=dict(spec.special_tokens) if special_tokens is None else special_tokens,
                      ranks=openai.load_ranks(spec))
            tok.name = src
            return tok
        try:
            ranks, pat, specials = src._mergeable_ranks, src._pat_str, src._special_tokens
        except AttributeError:
            raise TypeError(
                f"from_tiktoken takes a tiktoken.Encoding, an encoding name or a .tiktoken path, "
                f"not {type(src).__name__}"
            ) from None
        tok = cls(
            pattern=pat if pattern is None else pattern,
            special_tokens=dict(specials) if special_tokens is None else special_tokens,
            ranks=ranks,
        )
        if isinstance(getattr(src, "name", None), str):
            tok.name = src.name
        return tok

    def to_tiktoken(self, name: str = "bpe"):
        """A ``tiktoken.Encoding`` with our ranks, pattern and special tokens:
        it encodes every text to the same ids as this Tokenizer."""
        if self.picky is not None:
            raise refuse("a tiktoken.Encoding (ranks)")
        if self.superbpe is not None:
            raise refuse_superbpe("a tiktoken.Encoding (ranks)")
        tiktoken = _import_tiktoken()
        return tiktoken.Encoding(
            name, pat_str=self.pattern, mergeable_ranks=self._ranks(), special_tokens=dict(self.special_tokens)
        )

    # -- HuggingFace interop ------------------------------------------------

    def save_huggingface(self, path: PathLike) -> None:
        """Writes a HuggingFace ``tokenizer.json`` (byte-level BPE, our split
        regex, special tokens as added tokens) that ``tokenizers.Tokenizer.from_file``
        loads and that encodes text to our ids (special tokens always allowed, as
        HuggingFace does). Needs the merge list (see :attr:`merges`)."""
        from bpe.formats import huggingface as huggingface

        if self.picky is not None:
            raise refuse("a HuggingFace tokenizer.json (a merge list)")
        atomic_write_text(path, huggingface.to_json(self.vocab, self.merges, self.pattern, self.special_tokens))

    @classmethod
    def from_huggingface(cls: type[T], path: PathLike) -> T:
        """Reads a byte-level BPE ``tokenizer.json`` (ours, GPT-2's, ...). Added
        tokens become special tokens. Refuses, with the reason, what it cannot
        reproduce exactly: normalizers, other pre-tokenizers, non-BPE models."""
        from bpe.formats import huggingface as huggingface

        raw, name = read_file(path, "tokenizer.json", inside="tokenizer.json")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TokenizerFileError(
                f"{name} is not a tokenizer.json: it is not UTF-8 text (byte offset {e.start})"
            ) from None
        ranks, pattern, specials = huggingface.from_json(text, name)
        return cls(pattern=pattern, special_tokens=specials, ranks=ranks)

    def save_tiktoken(self, path: PathLike) -> None:
        """Writes the ranks as a ``.tiktoken`` file (base64 token, space, rank;
        one per line). Like tiktoken's files it holds neither the pattern nor
        the special tokens: pass them to ``from_tiktoken`` or ``tiktoken.Encoding``."""
        if self.picky is not None:
            raise refuse("a .tiktoken file (ranks)")
        if self.superbpe is not None:
            raise refuse_superbpe("a .tiktoken file (ranks)")
        atomic_write_text(path, "".join(line + "\n" for line in tiktoken_lines(self.vocab)))


def _import_tiktoken():
    try:
        import tiktoken
    except ImportError:
        raise ImportError("this needs the tiktoken package: pip install 'bpe[tiktoken]'") from None
    return tiktoken


