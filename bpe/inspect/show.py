"""`bpe show`: text with its token boundaries made visible.

``pieces`` turns ids into display strings (shared with the web page of
``bpe serve``): whitespace made visible (``·`` space, ``↵`` newline, ``→``
tab, ``␍`` carriage return), and bytes that are not whole characters within
their token (byte-level pieces of a character split across tokens) as
``<0xE2>``. ``render`` joins them for a terminal: alternating background
colours, or, without colour, ``|`` between tokens.
"""

from __future__ import annotations

import codecs
import os
import sys

from bpe.tokenizer import Tokenizer

VISIBLE = {" ": "·", "\n": "↵", "\t": "→", "\r": "␍"}
_VISIBLE_TABLE = str.maketrans(VISIBLE)

#: Background colours that alternate from token to token (ANSI 256-colour
#: pastels, readable with black text), then the id colour (dim).
BACKGROUNDS = ("\x1b[48;5;153m", "\x1b[48;5;223m", "\x1b[48;5;194m", "\x1b[48;5;225m")
FOREGROUND = "\x1b[38;5;16m"
DIM = "\x1b[2m"
RESET = "\x1b[0m"


def _hex_bytes(error: UnicodeDecodeError):
    bad = error.object[error.start : error.end]
    return "".join(f"<0x{b:02X}>" for b in bad), error.end


codecs.register_error("bpe-show-hex", _hex_bytes)


def piece(raw: bytes) -> str:
    """One token's bytes for display: UTF-8 with whitespace made visible,
    stray bytes as ``<0xE2>``."""
    return raw.decode("utf-8", errors="bpe-show-hex").translate(_VISIBLE_TABLE)


def pieces(tok: Tokenizer, ids) -> list[str]:
    """The display string of each id."""
    return [piece(tok.token_bytes(int(i))) for i in ids]


def is_partial(raw: bytes) -> bool:
    """Whether a token's bytes are not whole UTF-8 characters."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def use_color(choice: str, stream=None) -> bool:
    """--color auto|always|never: auto colours a terminal, unless NO_COLOR is
    set (https://no-color.org) or TERM is dumb."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def render(tok: Tokenizer, ids, *, color: bool, show_ids: bool = False) -> str:
    """The text of ``ids``, token by token. A newline ends its line (after
    its ``↵``), so the text keeps its shape."""
    out = []
    for k, i in enumerate(ids):
        text = tok.token_bytes(int(i)).decode("utf-8", errors="bpe-show-hex")
        parts = text.split("\n")
        lines = [p.translate(_VISIBLE_TABLE) + "↵" for p in parts[:-1]] + [parts[-1].translate(_VISIBLE_TABLE)]
        # The id goes after the token's last visible line (a token that ends
        # with a newline has its id after the ↵, not on the next line).
        at = len(lines) - 2 if len(lines) > 1 and not lines[-1] else len(lines) - 1
        label = f"[{int(i)}]" if show_ids else ""
        if color:
            bg = BACKGROUNDS[k % len(BACKGROUNDS)]
            # Each line coloured apart, reset before the newline: a background
            # left on across a line break paints the rest of the terminal line.
            shown = [f"{bg}{FOREGROUND}{line}{RESET}" if line else "" for line in lines]
            if label:
                shown[at] += f"{DIM}{label}{RESET}"
            out.append("\n".join(shown))
        else:
            lines[at] += label
            out.append("\n".join(lines) + ("|" if k + 1 < len(ids) else ""))
    return "".join(out)


def summary(tok: Tokenizer, text: str, ids) -> str:
    n_bytes = len(text.encode("utf-8", errors="replace"))
    return f"{len(ids):,} tokens, {len(text):,} characters, {n_bytes:,} bytes"
