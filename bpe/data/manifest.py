"""The sharded token directory's format, in one place: ``OUT/shard-NNNNN.bin``
(each shard's ids), ``OUT/.shard-NNNNN.bin.json`` (a finished shard's record,
for ``--resume``) and ``OUT/manifest.json`` (written last: its presence marks
a complete directory). Written by either engine (``bpe/distributed/``), read
by :class:`bpe.data.ShardedTokens`.

The manifest::

    {"format": "bpe-shards v1", "dtype": "uint16", "byte_order": "little",
     "tokenizer": {"file", "sha256", "n_vocab", "eot"}, "separator": ...,
     "tokens": N, "documents": N, "bytes": N, "skipped_records": ...,
     "sources": [...], "shards": [{"file", "source", "start", "end", "kind",
     "bytes", "documents", "tokens", "sha256", "lead_separator"}, ...]}
"""

from __future__ import annotations

import json
import os
import re

from bpe.data.dataset import META, DatasetError

__all__ = ["MANIFEST", "SHARDS_FORMAT", "VAL_FRACTION", "is_sharded", "make_manifest", "read_manifest",
           "record_path", "remove_shard_files", "shard_name"]

MANIFEST = "manifest.json"
SHARDS_FORMAT = "bpe-shards v1"
#: The split of a sharded directory for training: the last VAL_FRACTION of
#: its tokens (the end of the concatenated stream) is validation.
VAL_FRACTION = 0.1
#: Every file a sharded directory holds (nothing else there is ours to remove).
_OURS = re.compile(r"^(shard-\d{5}\.bin|\.shard-\d{5}\.bin\.json|manifest\.json)$")
#: A shard's entry in the manifest: these fields of its record.
_SHARD_FIELDS = ("file", "source", "start", "end", "kind", "bytes", "documents", "tokens", "sha256", "lead_separator")


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.bin"


def record_path(bin_path: str) -> str:
    """The record beside a shard's ids: ``.shard-NNNNN.bin.json`` (hidden)."""
    d, name = os.path.split(bin_path)
    return os.path.join(d, f".{name}.json")


def is_sharded(data_dir: os.PathLike | str) -> bool:
    """A directory of shards (``manifest.json``), not a ``train.bin`` dataset."""
    d = os.fspath(data_dir)
    return os.path.isfile(os.path.join(d, MANIFEST)) and not os.path.exists(os.path.join(d, META))


def remove_shard_files(out_dir: str) -> None:
    """The shards, records and manifest of an earlier run (nothing else)."""
    for name in os.listdir(out_dir):
        if _OURS.match(name):
            os.unlink(os.path.join(out_dir, name))


def make_manifest(entries: list[dict], *, dtype: str, tokenizer: dict, separator, sources: list,
                  skipped_records) -> dict:
    """The manifest of a finished run from its shards' records (in order)."""
    return {
        "format": SHARDS_FORMAT,
        "dtype": dtype,
        "byte_order": "little",
        "tokenizer": tokenizer,
        "separator": separator,
        "tokens": sum(e["tokens"] for e in entries),
        "documents": sum(e["documents"] for e in entries),
        "bytes": sum(e["bytes"] for e in entries),
        "skipped_records": skipped_records,
        "sources": sources,
        "shards": [{k: e[k] for k in _SHARD_FIELDS} for e in entries],
    }


def read_manifest(data_dir: os.PathLike | str) -> dict:
    """The manifest of a sharded directory, checked for its format; a
    ``DatasetError`` saying how to make it again otherwise."""
    d = os.fspath(data_dir)
    path = os.path.join(d, MANIFEST)
    redo = f"re-run `bpe encode FILE... -t TOK --out {d} --engine ray` (or --resume it)"
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except FileNotFoundError:
        raise DatasetError(f"{d} has no {MANIFEST}: not a sharded directory, or an incomplete one; {redo}") from None
    except ValueError:
        raise DatasetError(f"{path} is not valid JSON; {redo}") from None
    if not isinstance(m, dict) or m.get("format") != SHARDS_FORMAT or m.get("dtype") not in ("uint16", "uint32"):
        raise DatasetError(f"{path} is not a {SHARDS_FORMAT} manifest; {redo}")
    return m
