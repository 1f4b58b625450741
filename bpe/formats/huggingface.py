"""HuggingFace `tokenizer.json` for byte-level BPE: write ours, read theirs.

A byte-level BPE `tokenizer.json` stores tokens as printable strings: GPT-2
maps each of the 256 bytes to one Unicode character (printable ASCII and
Latin-1 stay themselves; the others, space and control bytes among them, move
to U+0100 and up, so a space is "Ġ"). The model is a BPE with a merge list
whose order is the merge priority; the split regex is a `Split` pre-tokenizer
followed by `ByteLevel` (which maps bytes to those characters); special tokens
are "added tokens".

What we write encodes to our ids in `tokenizers`: the merge list is in rank
order, and `ignore_merges` makes a chunk that is a whole token come out as that
token directly, as tiktoken's (and our) encoding does.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from bpe._core import GPT2_PATTERN, GPT4_PATTERN, Pretokenizer

# HuggingFace's own GPT-2 split (used by `ByteLevel` with `use_regex: true`).
# It splits exactly as tiktoken's faster r50k pattern, GPT2_PATTERN.
HF_GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# GPT-4's pattern without possessive quantifiers. `tokenizers` runs regexes on
# Oniguruma with Ruby syntax, where `\p{N}{1,3}+` is not possessive but means
# `(?:\p{N}{1,3})+` — any number of digits — so tiktoken's GPT4_PATTERN would
# split "1999" whole there. This form splits identically in both engines: it
# is cl100k's first published pattern (Llama 3's, LLAMA3_PATTERN) with GPT-4's
# `\s++$` as `\s+\z`, without which a text ending in white space with a
# newline and more white space after it ("x\n  ") splits differently.
HF_GPT4_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s+\z|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Patterns written to tokenizer.json in an Oniguruma-safe form, and read back
# as the built-in patterns (which run on our fast lexers). The other built-in
# regexes (GPT-4o's, Llama 3's, Qwen2's, the steps of DeepSeek-V3's and of the
# digit rules) are written as they are, and read back as themselves.
TO_HF = {GPT2_PATTERN: HF_GPT2_REGEX, GPT4_PATTERN: HF_GPT4_REGEX}
FROM_HF = {v: k for k, v in TO_HF.items()}


@lru_cache(maxsize=1)
def byte_to_char() -> dict[int, str]:
    """GPT-2's byte -> printable character table."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@lru_cache(maxsize=1)
def char_to_byte() -> dict[str, int]:
    return {c: b for b, c in byte_to_char().items()}


def token_to_str(token: bytes) -> str:
    table = byte_to_char()
    return "".join(table[b] for b in token)


def str_to_token(text: str, where: str) -> bytes:
    table = char_to_byte()
    try:
        return bytes(table[c] for c in text)
    except KeyError as e:
        raise ValueError(
            f"{where}: token {text!r} has the character {e.args[0]!r}, which is not one of the 256 "
            f"byte-level characters: this is not a byte-level BPE tokenizer"
        ) from None


def to_json(vocab: dict[int, bytes], merges: dict[tuple[int, int], int], pattern: str,
            special_tokens: dict[str, int]) -> str:
    """The `tokenizer.json` text for a byte-level BPE vocabulary."""
    ordered = sorted(merges.items(), key=lambda kv: kv[1])  # priority = rank
    model = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": True,
        "vocab": _model_vocab(vocab, special_tokens),
        # "a b" strings rather than pairs: every version of `tokenizers` reads them,
        # and byte-level token strings never contain a space.
        "merges": [f"{token_to_str(vocab[l])} {token_to_str(vocab[r])}" for (l, r), _ in ordered],
    }
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for t, i in sorted(special_tokens.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            # One isolated Split per step of the pattern (a sequence, such as
            # DeepSeek-V3's or a digit rule's, has several): HF applies them
            # in turn, each to the pieces of the ones before, as we do.
            "pretokenizers": [
                *({"type": "Split", "pattern": {"Regex": TO_HF.get(step, step)}, "behavior": "Isolated",
                   "invert": False} for step in Pretokenizer(pattern).steps),
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": model,
    }
    return json.dumps(doc, ensure_ascii=False, indent=1)


def _model_vocab(vocab: dict[int, bytes], special_tokens: dict[str, int]) -> dict[str, int]:
    """The BPE model's vocabulary: the tokens as byte-level strings, and the
    special tokens under their own text. `tokenizers` gives an added token
    the model's id for its text where the model has one, and otherwise the
    next id after the vocabulary, whatever id the file says: so a special
    token after a hole in the ids (cl100k's <|endoftext|> is 100257, and
    100256 is no token) would be renumbered unless the model lists it. The
    model never produces them itself (added tokens are split off first)."""
    out = {token_to_str(b): i for i, b in sorted(vocab.items())}
    for text, i in sorted(special_tokens.items(), key=lambda kv: kv[1]):
        out.setdefault(text, i)
    return out


def _pattern(pre: dict | None, where: str) -> str:
    """The split regex of a byte-level pre-tokenizer configuration."""
    if pre is None:
        raise ValueError(f"{where}: no pre_tokenizer: this is not a byte-level BPE tokenizer")
    steps = pre["pretokenizers"] if pre.get("type") == "Sequence" else [pre]
    splits, pattern, byte_level = [], None, False
    for step in steps:
        kind = step.get("type")
        if kind == "Split":
            if step.get("behavior") != "Isolated" or step.get("invert"):
                raise ValueError(f"{where}: only Split pre-tokenizers with behavior Isolated are supported")
            if byte_level:
                raise ValueError(f"{where}: a Split after the ByteLevel pre-tokenizer is not supported")
            pat = step["pattern"]
            splits.append(pat["Regex"] if "Regex" in pat else re.escape(pat["String"]))
            # Several Splits are a sequence (DeepSeek-V3's), stored as one
            # pattern: the JSON array of the regexes.
            pattern = (FROM_HF.get(splits[0], splits[0]) if len(splits) == 1
                       else Pretokenizer.sequence([FROM_HF.get(s, s) for s in splits]).pattern)
        elif kind == "ByteLevel":
            if step.get("add_prefix_space"):
                raise ValueError(f"{where}: ByteLevel add_prefix_space=true is not supported")
            byte_level = True
            if step.get("use_regex", True):
                if pattern is not None:
                    raise ValueError(f"{where}: a Split before a ByteLevel with use_regex is not supported")
                pattern = GPT2_PATTERN  # splits exactly as HF_GPT2_REGEX, on the fast path
        else:
            raise ValueError(f"{where}: the pre-tokenizer {kind!r} is not supported")
    if not byte_level:
        raise ValueError(f"{where}: no ByteLevel pre-tokenizer: this is not a byte-level BPE tokenizer")
    if pattern is None:
        raise ValueError(f"{where}: no split pattern found in the pre-tokenizer")
    return pattern


def from_json(text: str, where: str) -> tuple[dict[bytes, int], str, dict[str, int]]:
    """(ranks, pattern, special tokens) of a byte-level BPE `tokenizer.json`."""
    try:
        doc = json.loads(text)
        model = doc["model"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{where}: not a HuggingFace tokenizer.json") from None
    if model.get("type") != "BPE":
        raise ValueError(f"{where}: the model is {model.get('type')!r}; only BPE is supported")
    normalizer = doc.get("normalizer")
    # An empty Sequence (DeepSeek-V3's file has one) changes nothing.
    if normalizer and normalizer != {"type": "Sequence", "normalizers": []}:
        raise ValueError(f"{where}: normalizers are not supported (found {doc['normalizer'].get('type')!r})")
    pattern = _pattern(doc.get("pre_tokenizer"), where)
    added = {t["content"]: t["id"] for t in doc.get("added_tokens", [])}
    ranks = {str_to_token(s, where): i for s, i in model["vocab"].items() if s not in added}
    # Our encoding ranks tokens by id (as tiktoken does); HuggingFace by merge
    # order. They agree when ids grow with the merge order, as in GPT-2's
    # tokenizer.json and in ours. Refuse anything else rather than encode wrongly.
    last = -1
    for m in model.get("merges", []):
        left, right = m.split(" ") if isinstance(m, str) else m
        token = str_to_token(left, where) + str_to_token(right, where)
        rank = ranks.get(token)
        if rank is None:
            raise ValueError(f"{where}: merge {m!r} makes a token that is not in the vocabulary")
        if rank <= last:
            raise ValueError(
                f"{where}: token ids do not grow with the merge order (merge {m!r} makes id {rank} "
                f"after id {last}); such a vocabulary cannot be encoded by rank"
            )
        last = rank
    return ranks, pattern, added
