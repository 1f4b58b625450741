"""Special tokens: which texts may be one, the ids they get, and what
encoding does when it meets one (tiktoken's policy: allowed, disallowed, or
plain text).
"""

from __future__ import annotations

from typing import Collection

ENDOFTEXT = "<|endoftext|>"


def check_encodable(special: str) -> None:
    try:
        special.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"special token {special!r} is not valid text: it holds a lone surrogate, which has no UTF-8 form"
        ) from None


def disallowed_error(found: str, where: str = "the text") -> ValueError:
    return ValueError(
        f"{where} contains the special token {found!r}, which is disallowed.\n"
        f"To encode it as the special token, pass allowed_special={{{found!r}}} "
        f"(or allowed_special='all').\n"
        f"To encode it as ordinary text, pass disallowed_special=() "
        f"or use encode_ordinary()."
    )


def check_special_tokens(special_tokens: Collection[str]) -> list[str]:
    if isinstance(special_tokens, str):
        special_tokens = [special_tokens]
    specials = list(special_tokens)
    for s in specials:
        if not isinstance(s, str) or not s:
            raise ValueError(f"special tokens must be non-empty str, got {s!r}")
        check_encodable(s)
    dupes = sorted({s for s in specials if specials.count(s) > 1})
    if dupes:
        raise ValueError(f"duplicate special tokens: {dupes}")
    return specials


def check_assigned(special_tokens: dict[str, int], vocab: dict[int, bytes]) -> dict[str, int]:
    """Checks special tokens with their ids: non-empty text, and ids that are
    non-negative ints taken by no ordinary token and no other special one."""
    special_tokens = dict(special_tokens or {})
    for text, i in special_tokens.items():
        if not isinstance(text, str) or not text:
            raise ValueError(f"special tokens must be non-empty str, got {text!r}")
        check_encodable(text)
        if isinstance(i, bool) or not isinstance(i, int) or i < 0 or i in vocab:
            raise ValueError(f"special token {text!r} has id {i!r}, which is taken or invalid")
    if len(set(special_tokens.values())) != len(special_tokens):
        raise ValueError("two special tokens share an id")
    return special_tokens
