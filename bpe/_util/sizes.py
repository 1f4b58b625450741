"""Sizes as people write them, one syntax for every flag and parameter.

**Bytes** (``--max-memory``, ``--shard-size``, ``--limit``, ``--max-body``,
``max_memory=``, ``shard_size=``, ``set_cache_size``): a number of bytes, or
a number and a unit, case-insensitive, as GNU coreutils read them:

    K, M, G, T        powers of 1024   (64M = 64 * 2**20)
    KiB, MiB, GiB...  powers of 1024   (the same, said explicitly)
    KB, MB, GB, TB    powers of 1000   (10MB = 10 * 10**6)

``1.5G`` is allowed (rounded down to whole bytes); ``_`` may group digits.

**Counts** (``--vocab``): a whole number, with ``k``/``m`` for thousands and
millions (``50k`` = 50,000, as vocabulary sizes are said) or ``Ki``/``Mi``
for powers of 1024 (``32Ki`` = 32,768).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["parse_bytes", "parse_count"]

_BINARY = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BYTES = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt])(i?)(b?)|(b?))", re.I)
_COUNT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(?:([km])(i?))?", re.I)

BYTES_HELP = "a size in bytes: 4096, 64M or 64MiB (2**20), 10MB (10**6)"


def parse_bytes(value, name: str = "size") -> int:
    """An int of bytes, or a str such as ``"2G"``, ``"512MiB"``, ``"10MB"``
    (see the module's doc) -> bytes, at least 1. ``ValueError`` or
    ``TypeError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{name} must be a number of bytes or a str such as '64M', not {type(value).__name__}")
    if isinstance(value, str):
        m = _BYTES.fullmatch(value.strip().replace("_", ""))
        if not m:
            raise ValueError(f"{name} {value!r} is not a size; write e.g. 4096, 64M or 64MiB (2**20 bytes each), "
                             f"or 10MB (10**6)")
        number, unit, i, b = Decimal(m.group(1)), (m.group(2) or "").lower(), m.group(3), m.group(4)
        decimal = unit and b and not i  # "MB": powers of 1000; "M", "MiB", "Mi": powers of 1024
        value = int(number * (_DECIMAL[unit] if decimal else _BINARY[unit]))
    if value <= 0:
        raise ValueError(f"{name} must be more than 0 bytes, got {value}")
    return value


def parse_count(text: str, name: str = "count") -> int:
    """``"50k"`` -> 50000, ``"32Ki"`` -> 32768, ``"1.5k"`` -> 1500, ``"50_000"``
    -> 50000; a ``ValueError`` naming ``name`` for anything that is not a
    whole number."""
    m = _COUNT.fullmatch(str(text).strip().replace("_", "").replace(",", ""))
    if not m:
        raise ValueError(f"{name} {text!r} is not a number; write e.g. 50000, 50k or 32Ki")
    try:
        number = Decimal(m.group(1))  # Decimal, not float: 1.001k must be exactly 1001
    except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
        raise ValueError(f"{name} {text!r} is not a number") from None
    unit = (m.group(2) or "").lower()
    scale = _BINARY[unit] if m.group(3) else _DECIMAL.get(unit, 1)
    value = number * scale
    if value != int(value):
        raise ValueError(f"{name} {text!r} is not a whole number")
    return int(value)
