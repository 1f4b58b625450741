"""Token datasets on disk: ``train.bin`` / ``val.bin`` + ``meta.json``.

The format is deliberately dumb, so that any training loop can read it:

    DIR/train.bin   the token ids of the training split, one after another,
                    fixed-width little-endian unsigned ints (uint16 or uint32),
                    no header: ``np.memmap(path, dtype="<u2", mode="r")``
    DIR/val.bin     the same for the validation split
    DIR/meta.json   dtype, token and byte counts per split, the sha256 of the
                    tokenizer file, how the split was made

Between documents (each input file is one document) stands the tokenizer's
``<|endoftext|>`` id, so a model learns where texts end and never reads one
document as the continuation of another.

A directory of shards (``shard-NNNNN.bin`` + ``manifest.json``, written by
``bpe encode --engine ray`` or ``--format shards``: ``bpe/distributed/local.py``) is
read as one sequence by :class:`ShardedTokens`; `bpe gpt train` accepts it,
its last 10% of tokens being validation.

Writing (:func:`write_dataset`) needs no extra: the Rust core reads, encodes
and writes the ids, so ``bpe encode --out DIR`` works in a core install.
Reading (:func:`load_split`, :func:`get_batch`) needs numpy and torch, the
``model`` extra: ``pip install -e '.[model]'``.

The split: each document's first ``1 - val_fraction`` of bytes (cut at the
start of a line) goes to ``train.bin``, the rest to ``val.bin``. For a single
corpus file (tinyshakespeare) that is the usual "last 10% is validation"; for
many documents every document contributes to both splits.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Collection, Sequence

from bpe import _core
from bpe._tokenizer.dropout import check_dropout
from bpe._util.files import (atomic_write_text, check_readable_file, check_text_file, output_target,
                             remove_stale_temps, temp_path)
from bpe.progress import Progress
from bpe._util.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer

META = "meta.json"
SPLITS = ("train", "val")
DATASET_FORMAT = "bpe-dataset v1"

#: Compressed files and pipes are read in blocks of about this many bytes
#: (``rust/run/bulk/mod.rs``); regular files in pieces of at most this and 2 MiB.
BLOCK_BYTES = 16 << 20

NUMPY_MISSING = "reading token datasets needs numpy and torch: pip install -e '.[model]'"


class DatasetError(ValueError):
    """A dataset directory that is missing, incomplete or inconsistent."""


# -- dtype -------------------------------------------------------------------


def dtype_for(n_vocab: int) -> str:
    """The narrowest dtype that holds every id: ``"uint16"`` when the largest
    id (``n_vocab - 1``) is at most 65,535, else ``"uint32"``.

    uint16 halves the file size and the memory traffic of batching; it holds
    GPT-2's 50,257 ids but not cl100k's 100,277."""
    if n_vocab - 1 <= 0xFFFF:
        return "uint16"
    if n_vocab - 1 <= 0xFFFF_FFFF:
        return "uint32"
    raise ValueError(f"{n_vocab} token ids do not fit in 32 bits")


def _width(dtype: str) -> int:
    return {"uint16": 2, "uint32": 4}[dtype]


def tokenizer_sha256(tok: Tokenizer) -> str:
    """What a dataset and a checkpoint record of their tokenizer: the sha256
    of its file as :meth:`Tokenizer.save` writes it (for a tokenizer loaded
    from such a file, the file's own sha256), whatever it was loaded from."""
    return hashlib.sha256(tok._dumps().encode("utf-8")).hexdigest()


def file_sha256(path) -> str:
    """The sha256 of a file's bytes, in hex, read 1 MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- the split --------------------------------------------------------------------
#
# The Rust core reads each part of a file in blocks that end at safe cut
# points (rust/input/mod.rs, rust/run/bulk/mod.rs): points that, for the built-in
# patterns, no chunk crosses (proven in rust/split/pretokenize.rs), so the ids are
# exactly those of encoding the whole part.

def _split_offset(path: str, size: int, val_fraction: float) -> int:
    """Where ``val.bin``'s part of a file starts: the first line start at or
    after ``(1 - val_fraction) * size``, else the last one before it, else (a
    file without newlines) the first character boundary at or after it.
    Reads only the bytes between the target and the nearest newline."""
    if val_fraction <= 0 or size == 0:
        return size
    target = int(round(size * (1 - val_fraction)))
    step = 64 << 10
    with open(path, "rb") as f:
        pos = target
        while pos < size:  # forwards to the next newline
            f.seek(pos)
            block = f.read(step)
            nl = block.find(b"\n")
            if nl >= 0:
                if pos + nl + 1 < size:
                    return pos + nl + 1
                break
            pos += len(block)
        end = target
        while end > 0:  # backwards to the previous newline
            start = max(0, end - step)
            f.seek(start)
            nl = f.read(end - start).rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            end = start
        f.seek(target)
        # Skip UTF-8 continuation bytes (0b10xxxxxx): never cut a character.
        while target < size and 0x80 <= f.read(1)[0] < 0xC0:
            target += 1
        return target


#: The most bytes held without a safe cut point, as in the Rust core
#: (``rust/limits.rs``): a longer word, number or white-space run is an error.
MAX_UNCUT_BYTES = 64 << 20


# -- writing -------------------------------------------------------------------


class _Writer:
    """A temporary file beside ``final`` that the core appends ids to (and
    syncs); ``commit`` renames it."""

    def __init__(self, final: str, force: bool):
        # As bpe._util.files.atomic_write: a symlink is followed, and a directory,
        # a device or (without force) a read-only file in the way is refused
        # now, before the encoding, not after.
        self.final = output_target(final, force=force)
        self.tmp = temp_path(self.final)
        open(self.tmp, "xb").close()  # made here, empty: never someone else's file
        self.tokens = 0
        self.bytes = 0
        self.documents = 0

    def commit(self) -> None:
        os.replace(self.tmp, self.final)

    def discard(self) -> None:
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def _fsync_dir(directory: str) -> None:
    # Makes the renames themselves durable (POSIX); harmless where unsupported.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_dataset(
    files: Sequence[os.PathLike | str],
    tokenizer: os.PathLike | str | Tokenizer,
    out_dir: os.PathLike | str,
    *,
    val_fraction: float = 0.1,
    allowed_special: Collection[str] | str = (),
    disallowed_special: Collection[str] | str = "all",
    num_threads: int | None = None,
    progress: bool | None = None,
    block_bytes: int = BLOCK_BYTES,
    tokenizer_name: str | None = None,
    force: bool = False,
    dropout: float = 0.0,
    seed: int | None = None,
) -> dict:
    """Encodes ``files`` (each one document) with ``tokenizer`` (a Tokenizer,
    or the path of a saved one) into ``out_dir/train.bin``, ``val.bin`` and
    ``meta.json``; returns the metadata written.

    Files are streamed (memory does not grow with their size: about 100 MB
    at peak) and read, cut and encoded on all cores by the Rust core.
    Special-token text in the files is handled as by :meth:`Tokenizer.encode`
    (by default it is an error; ``disallowed_special=()`` makes it ordinary
    text, ``allowed_special="all"`` the special tokens). Nothing in
    ``out_dir`` changes unless everything succeeds; ``out_dir`` is created
    (one level) if missing, and removed again if this call created it and
    then failed. ``meta.json`` names the tokenizer as ``tokenizer_name``
    (default: its path as given, or "in memory"). A read-only ``.bin`` or
    ``meta.json`` already there is replaced only with ``force``.

    ``dropout`` (in [0, 1)): encode with BPE-dropout (``Tokenizer.encode``'s
    ``dropout``), on one thread, each document read whole; with ``seed``,
    document k (in the order train, val of each file) gets seed ``seed + k``,
    so the dataset is made again exactly. ``meta.json`` records both. For
    several epochs of dropout, make a dataset per epoch with its own seed.
    """
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be at least 0 and below 1, got {val_fraction}")
    if dropout:
        check_dropout(dropout, seed)  # before anything is made
    if isinstance(tokenizer, Tokenizer):
        tok = tokenizer
        tokenizer_name = tokenizer_name or "in memory"
    else:
        tokenizer_path = check_readable_file(tokenizer)
        tok = Tokenizer.load(tokenizer_path)
        tokenizer_name = tokenizer_name or tokenizer_path
    tok_sha = tokenizer_sha256(tok)  # `bpe gpt train -t TOK` checks it is the same tokenizer
    allowed = sorted(tok._allowed(allowed_special))
    disallowed = sorted(tok._disallowed(set(allowed), disallowed_special))
    paths = [check_text_file(p) for p in files]
    if not paths:
        raise ValueError("no input files")
    eot = tok.special_tokens.get(ENDOFTEXT)
    if eot is None and len(paths) > 1:
        raise ValueError(
            f"{tokenizer_path} has no {ENDOFTEXT} special token to put between documents; "
            f"train the tokenizer without --no-special, or encode the files as one (cat them)"
        )
    dtype = dtype_for(tok.n_vocab)
    out_dir = os.fspath(out_dir)
    created = _prepare_dir(out_dir)

    if progress is None:
        progress = sys.stderr.isatty()
    total = sum(os.path.getsize(p) for p in paths)
    writers: dict[str, _Writer] = {}
    try:
        for split in SPLITS:
            writers[split] = _Writer(os.path.join(out_dir, f"{split}.bin"), force)
        meta_path = output_target(os.path.join(out_dir, META), force=force)
        # Each file's first (1 - val_fraction) to train.bin, the rest to
        # val.bin: a document in each. The core reads, cuts (at points that
        # change no id) and encodes them on all cores, and appends the ids,
        # the end-of-text id between documents.
        segments = []
        for path in paths:
            size = os.path.getsize(path)
            split_at = _split_offset(path, size, val_fraction)
            for k, (split, start, end) in enumerate((("train", 0, split_at), ("val", split_at, size))):
                if end > start:
                    segments.append((path, start, end, k, True))
                    writers[split].documents += 1
                    writers[split].bytes += end - start
        with Progress("encoding", total, show=progress) as bar:
            if dropout:
                counts = _write_dropout(tok, segments, writers, allowed, disallowed, eot, _width(dtype),
                                        dropout, seed, bar)
            else:
                counts = _core.write_ids(
                    tok._core, segments, [w.tmp for w in writers.values()],
                    allowed, eot,
                    0 if num_threads is None else num_threads, _width(dtype), block_bytes,
                    bar.update, disallowed,
                )
            bar.update(total, tokens=sum(counts))
        for w, n in zip(writers.values(), counts):
            w.tokens = n

        if writers["train"].tokens == 0:
            raise ValueError("the input files are empty: there is nothing to train on")
        if val_fraction > 0 and writers["val"].tokens < 2:
            raise ValueError(
                "the validation split is empty (the input is too short); use more text or a larger --val-fraction"
            )
        meta = {
            "format": DATASET_FORMAT,
            "dtype": dtype,
            "byte_order": "little",
            "tokenizer": {
                "file": os.fspath(tokenizer_name),
                "sha256": tok_sha,
                "n_vocab": tok.n_vocab,
                "eot": eot,
            },
            "split": {
                "val_fraction": val_fraction,
                "how": "each document's first (1 - val_fraction) of bytes, cut at a line start, "
                "to train; the rest to val",
            },
            "splits": {
                split: {"file": f"{split}.bin", "tokens": w.tokens, "bytes": w.bytes, "documents": w.documents}
                for split, w in writers.items()
            },
            # As given: a dataset directory moved with its sources (or to
            # another machine) still names them the way its maker did.
            "sources": [os.fspath(p) for p in paths],
        }
        if dropout:
            meta["dropout"] = {"p": dropout, "seed": seed}
        # Commit: meta.json goes first and comes back last, so that at every
        # instant the directory either has no meta.json (incomplete: readers
        # refuse it) or one whose counts match the .bin files beside it.
        if os.path.exists(meta_path):
            os.unlink(meta_path)
        for w in writers.values():
            w.commit()
        atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
        _fsync_dir(out_dir)
        return meta
    except BaseException:
        for w in writers.values():
            w.discard()
        if created:
            try:
                os.rmdir(out_dir)
            except OSError:
                pass
        raise


def _write_dropout(tok, segments, writers, allowed, disallowed, eot, width, dropout, seed, bar) -> list[int]:
    """``_core.write_ids`` with BPE-dropout, in Python over the core's
    dropout encoder: each segment (a document) read whole and encoded, the
    end-of-text id before each document but a split's first, as the core
    puts it. Returns the ids written to each split."""
    import array

    counts = [0] * len(writers)
    outs = [open(w.tmp, "ab") for w in writers.values()]
    done = 0
    try:
        for k, (path, start, end, split, _) in enumerate(segments):
            with open(path, "rb") as f:
                f.seek(start)
                text = f.read(end - start).decode("utf-8")
            try:
                ids = tok.encode(text, dropout=dropout, seed=None if seed is None else seed + k,
                                 allowed_special=set(allowed), disallowed_special=set(disallowed))
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
            if counts[split] and eot is not None:
                ids.insert(0, eot)
            a = array.array("H" if width == 2 else "I", ids)
            if sys.byteorder != "little":
                a.byteswap()
            outs[split].write(a.tobytes())
            counts[split] += len(ids)
            done += end - start
            bar.update(done, tokens=sum(counts))
    finally:
        for f in outs:
            f.close()
    return counts


def _prepare_dir(out_dir: str) -> bool:
    """Makes sure ``out_dir`` is a writable directory; returns True if created.
    Temporary files that a killed earlier run left in it are removed."""
    if os.path.isdir(out_dir):
        if not os.access(out_dir, os.W_OK):
            raise PermissionError(f"cannot write to {out_dir}: the directory is not writable")
        remove_stale_temps(out_dir)
        return False
    if os.path.exists(out_dir):
        raise ValueError(
            f"{out_dir} is not a directory: a dataset is a directory (train.bin, val.bin, {META}); "
            f"give one, or (CLI) --format ids, json or numpy to write one file"
        )
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):
        raise ValueError(f"cannot create {out_dir}: directory {parent} does not exist")
    try:
        os.mkdir(out_dir)
    except OSError as e:
        raise ValueError(f"cannot create {out_dir}: {e.strerror}") from None
    return True
