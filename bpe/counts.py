"""Chunk counts as a value: count a corpus once, keep the counts in a file,
merge the counts of shards, and train from them.

Training has two phases (``rust/train/mod.rs``): counting every distinct
pre-tokenized chunk of the corpus, then the merge loop, whose whole input is
those counts. So the counts can stand in for the corpus:

    >>> part = bpe.count([Path("shard1.txt")], pattern="gpt4")
    >>> part.save("shard1.bpec")                     # on each machine
    >>> bpe.Counts.merge_files(["shard1.bpec", "shard2.bpec"], "all.bpec")
    >>> tok = Tokenizer.train_from_counts("all.bpec", 50_000)

and the tokenizer is the one ``Tokenizer.train`` makes from all shards at
once, byte for byte. The ``.bpec`` file (``rust/train/table.rs``) keeps its
chunks sorted, so any number of them merge in one streaming pass.

``max_memory`` caps counting: past it the counts are spilled to sorted files
in the temporary directory (``TMPDIR``) and merged at the end, exactly
(``rust/train/spill.rs``). ``min_frequency``, at training, drops the chunks
seen fewer times: the one lossy knob, and what bounds training's memory.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from typing import Iterable

from bpe import _core
from bpe.sources.corpus import Source, feed
from bpe._util.sizes import parse_bytes
from bpe._util.files import PathLike, atomic_write, check_readable_file
from bpe._util.patterns import pattern_name, resolve_pattern
from bpe.sources.paths import SourceOptions, skipped_message

#: Units of ``max_memory`` strings: powers of 1024, as ``sort -S`` and
#: container limits use them ("2G" is 2 GiB).
def parse_memory(value, name: str = "max_memory") -> int | None:
    """``None`` (no cap), or a size in bytes (``bpe/_util/sizes.py``)."""
    return None if value is None else parse_bytes(value, name)


def check_min_frequency(value) -> int:
    """``min_frequency``: None (keep every chunk) or an int of at least 1."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"min_frequency must be an int (or None), not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"min_frequency must be at least 1 (1 keeps every chunk), got {value}")
    return value


def check_progress(progress) -> bool:
    if progress is None:
        return sys.stderr.isatty()
    if isinstance(progress, bool):
        return progress
    if type(progress).__module__ == "numpy" and type(progress).__name__ in ("bool", "bool_"):
        return bool(progress)
    raise TypeError(f"progress must be True, False or None, not {progress!r}")


def capped_trainer(pattern: str, max_memory) -> _core.Trainer:
    """A trainer for ``pattern`` whose counting maps spill to disk past
    ``max_memory`` (see :func:`parse_memory`)."""
    cap = parse_memory(max_memory)
    trainer = _core.Trainer(pattern)
    if cap is not None:
        trainer.set_max_memory(cap, tempfile.gettempdir())
    return trainer


def feed_capped(trainer: _core.Trainer, source: Source, progress: bool, options: SourceOptions | None = None):
    """``feed``, removing whatever was spilled to disk if it fails (also on
    Ctrl-C): not left for the garbage collector, which a traceback that
    holds the trainer would delay."""
    try:
        return feed(trainer, source, progress, options)
    except BaseException:
        trainer.discard_spilled()
        raise


class Counts:
    """The chunk counts of a corpus: each distinct pre-tokenized chunk
    (bytes) and how often it occurred, with the split pattern that cut them.

    Made by :func:`count`, :meth:`load` or :meth:`merge`; saved with
    :meth:`save`; trained from with ``Tokenizer.train_from_counts``.
    ``len(counts)`` is the number of distinct chunks.
    """

    def __init__(self, trainer: _core.Trainer, pattern: str):
        # Not for users: the counts live in a Rust trainer (and, under a
        # max_memory cap, partly in its files on disk).
        self._trainer = trainer
        self.pattern = pattern

    @classmethod
    def load(cls, path: PathLike) -> Counts:
        """Reads a ``.bpec`` file. A file that is not one, of another
        version, truncated or corrupted is refused with a ``ValueError``
        naming it and the byte offset."""
        p = check_readable_file(path)
        trainer = _core.Trainer.load_counts(p)
        return cls(trainer, trainer.pattern())

    def save(self, path: PathLike, *, force: bool = False) -> tuple[int, int]:
        """Writes the counts as a ``.bpec`` file, atomically (see
        ``bpe._util.files.atomic_write``; ``force`` replaces a read-only file).
        Returns (distinct chunks, sum of their counts) written."""
        written = []
        atomic_write(path, lambda f: written.append(self._trainer.save_counts(f.fileno(), os.fspath(path))),
                     force=force)
        return written[0]

    @classmethod
    def merge(cls, *counts: Counts) -> Counts:
        """The sum of several counts (of one pattern): a chunk's count is its
        count in all of them. The counts given are left as they were."""
        if not counts:
            raise ValueError("merge needs at least one Counts")
        for c in counts:
            if not isinstance(c, Counts):
                raise TypeError(f"merge takes Counts, not {type(c).__name__}; load files with Counts.load")
            if c.pattern != counts[0].pattern:
                raise ValueError(
                    f"cannot merge counts made with different split patterns ({_shown(counts[0].pattern)} "
                    f"and {_shown(c.pattern)}); count both with the same pattern"
                )
        trainer = _core.Trainer(counts[0].pattern)
        for c in counts:
            trainer.add_counts(c._trainer)
        return cls(trainer, counts[0].pattern)

    @staticmethod
    def merge_files(paths: Iterable[PathLike], out: PathLike, *, force: bool = False) -> tuple[int, int]:
        """Merges ``.bpec`` files into one at ``out`` (atomically), streaming:
        memory holds one entry per file, whatever their size. All must have
        one split pattern. Returns (distinct chunks, sum of their counts)."""
        if isinstance(paths, (str, bytes, os.PathLike)):
            raise TypeError("paths must be a list of .bpec files, not one path")
        files = [check_readable_file(p) for p in paths]
        if not files:
            raise ValueError("merge_files needs at least one .bpec file")
        written = []
        atomic_write(out, lambda f: written.append(_core.Trainer.merge_count_files(files, f.fileno(), os.fspath(out))),
                     force=force)
        _, entries, total = written[0]
        return entries, total

    def __len__(self) -> int:
        return self._trainer.size()[0]

    def total(self) -> int:
        """The number of chunk occurrences counted (the sum of the counts)."""
        return self._trainer.size()[1]

    def __repr__(self) -> str:
        return f"<Counts {len(self):,} chunks pattern={pattern_name(self.pattern) or 'custom'}>"


def _shown(pattern: str) -> str:
    return pattern_name(pattern) or repr(pattern)


def count(source: Source, *, pattern: str = "gpt4", digits: str | None = None, max_memory: int | str | None = None,
          progress: bool | None = None, text_field: str = "text", skip_bad: bool = False) -> Counts:
    """Counts the chunks of ``source`` (anything ``Tokenizer.train`` takes:
    a text, a path to any corpus file or directory, an iterable of texts and
    paths, a pyarrow table or dataset; ``text_field`` and ``skip_bad`` as
    there). ``pattern`` and ``digits`` as for ``Tokenizer.train``.

    ``max_memory``: a cap on the counting maps, in bytes or as "2G", "512M"
    (powers of 1024); past it, counts are spilled to sorted files in the
    temporary directory (``TMPDIR``), which are removed with the counts (or
    at once if counting fails). The counts are exact whatever the cap.
    ``progress``: a progress bar on stderr (default: when it is a terminal).
    """
    pattern = resolve_pattern(pattern, digits)
    progress = check_progress(progress)
    trainer = capped_trainer(pattern, max_memory)
    fed = feed_capped(trainer, source, progress, SourceOptions(text_field=text_field, skip_bad=skip_bad))
    skipped = skipped_message(fed.skipped)
    if skipped:
        warnings.warn(skipped, stacklevel=2)
    if fed.empty():
        raise ValueError(f"the corpus is empty ({fed.describe()}): there is nothing to count")
    return Counts(trainer, pattern)


def trainer_for(counts, min_frequency: int) -> tuple[_core.Trainer, str]:
    """A trainer holding ``counts`` (a :class:`Counts`, left as it is, or the
    path of a ``.bpec`` file, read straight into the trainer) less the
    chunks seen fewer than ``min_frequency`` times, and its pattern."""
    if isinstance(counts, Counts):
        return counts._trainer.fork(min_frequency), counts.pattern
    if isinstance(counts, (str, os.PathLike)):
        trainer = _core.Trainer.load_counts(check_readable_file(counts), min_frequency)
        return trainer, trainer.pattern()
    raise TypeError(f"counts must be a bpe.Counts or the path of a .bpec file, not {type(counts).__name__}")
