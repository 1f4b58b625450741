"""The corpus: what turns training sources (texts, files, iterables of
both) into documents for the Rust trainer, streamed in batches.

Rust reads files itself (in ~1 MB segments, on all cores); Python only checks
each path and hands texts over in batches, so memory grows with the number of
distinct chunks, never with the size of the corpus.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Iterable, Union

from bpe import _core

from bpe.sources import arrow as arrow_sources

from bpe.sources import paths as sources
from bpe.sources.paths import SourceOptions

Source = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]


def replace_surrogates(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; tiktoken replaces them with
    # U+FFFD this way, so we do too (ids then match tiktoken's).
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# Documents are handed to Rust in batches of about this many characters: big
# enough to keep all cores busy, small enough to bound memory when streaming.
_BATCH_CHARS = 8 << 20


class Fed:
    """What ``_feed`` gave the trainer: enough to call an empty corpus by its name."""

    def __init__(self):
        self.n_texts = self.text_chars = self.file_bytes = 0
        self.files: list[str] = []
        #: Bad records skipped in each file (with skip_bad).
        self.skipped: dict[str, int] = {}

    def empty(self) -> bool:
        return self.text_chars == 0 and self.file_bytes == 0

    def describe(self) -> str:
        parts = []
        if self.n_texts or not self.files:
            parts.append("no texts" if not self.n_texts else f"{self.n_texts} empty text(s)")
        if self.files:
            shown = ", ".join(self.files[:3]) + (", ..." if len(self.files) > 3 else "")
            parts.append(f"{len(self.files)} empty file(s): {shown}")
        return " and ".join(parts)


def feed(trainer: _core.Trainer, source: Source, progress: bool, options: SourceOptions | None = None) -> Fed:
    """Streams ``source`` into the trainer (see Tokenizer.train); files are
    read as ``options`` say (``bpe/sources/paths.py``: text, JSON Lines, Parquet,
    compressed; directories)."""
    options = options or SourceOptions()
    fed = Fed()
    if arrow_sources.is_arrow_source(source):
        name = arrow_sources.describe(source)
        fed.skipped[name] = _feed_arrow(trainer, source, name, options)
        fed.n_texts, fed.text_chars = 1, 1  # not known without reading it: counted as not empty
        return fed
    if isinstance(source, str):
        if len(source) < 4096 and "\n" not in source and os.path.isfile(source):
            warnings.warn(
                f"training on the text {source!r} itself, which is also the name of a file; "
                f"to train on the file, pass pathlib.Path({source!r})",
                stacklevel=3,
            )
        fed.n_texts, fed.text_chars = 1, len(source)
        feed_texts(trainer, [source])
        return fed
    if isinstance(source, (bytes, bytearray)):
        raise TypeError("source must be text (str) or paths, not bytes; decode it first")
    if isinstance(source, os.PathLike):
        source = [source]
    elif isinstance(source, Mapping) or not isinstance(source, Iterable):
        # A dict is iterable, but training on its keys is never what was meant.
        raise TypeError(f"source is {_kind(source)}: give a str, a path, or an iterable of texts/paths")
    batch: list[str] = []
    size = 0
    files: list[str] = []
    by_kind: dict[str, list[str]] = {"text": [], "jsonl": [], "parquet": []}
    for i, item in enumerate(source):
        if isinstance(item, str):
            batch.append(item)
            size += len(item)
            fed.n_texts += 1
            fed.text_chars += len(item)
            if size >= _BATCH_CHARS:
                feed_texts(trainer, batch)
                batch, size = [], 0
        elif isinstance(item, os.PathLike):
            for path in sources.expand([item]):
                path = sources.check(path, options)
                by_kind[sources.kind(path, options)].append(path)
                files.append(path)
                fed.file_bytes += 1 if path == "-" else os.path.getsize(path)
        else:
            raise TypeError(f"source item {i} is {_kind(item)}; expected str (text) or a path")
    fed.files = files
    if batch:
        feed_texts(trainer, batch)
    if by_kind["text"]:
        trainer.feed_files(by_kind["text"], progress)
    # Parquet files named so are read in Rust with the JSON Lines files (no
    # pyarrow: rust/input/parquet.rs); others called Parquet (input_format)
    # go through pyarrow.
    named = [p.lower().endswith(sources.PARQUET) for p in by_kind["parquet"]]
    records = by_kind["jsonl"] + [p for p, n in zip(by_kind["parquet"], named) if n]
    if records:
        skipped = trainer.feed_records(records, options.field_path, options.skip_bad, progress)
        fed.skipped.update(zip(records, skipped))
    for path in (p for p, n in zip(by_kind["parquet"], named) if not n):
        fed.skipped[path] = _feed_arrow(trainer, path, path, options)
    return fed


def _feed_arrow(trainer, source, name: str, options: SourceOptions) -> int:
    # The skipped records are reported once, with the other files' (by the
    # caller), not also by arrow_sources' own warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", arrow_sources.SkippedRecordsWarning)
        return arrow_sources.feed_arrow(trainer, source, column=options.text_field, name=name,
                                        skip_bad=options.skip_bad)


def _kind(value) -> str:
    """'a dict', 'an int', 'None': what a value is, for a message."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def feed_texts(trainer: _core.Trainer, texts: list[str]) -> None:
    try:
        trainer.feed_texts(texts)
    except UnicodeEncodeError:
        # A lone surrogate (from e.g. `errors="surrogateescape"`) has no UTF-8
        # form. Train on what `encode` will see: U+FFFD in its place, as
        # tiktoken does. Nothing was counted yet: conversion precedes counting.
        trainer.feed_texts([replace_surrogates(t) for t in texts])
