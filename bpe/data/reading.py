"""Reading token datasets: a ``train.bin``/``val.bin`` directory
(``bpe/data/dataset.py`` writes it) or a directory of shards
(``bpe/data/manifest.py``), as numpy arrays and random training windows.

Needs numpy (and torch for :func:`get_batch`), the ``model`` extra:
``pip install 'bpe[model]'``.
"""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING

from bpe.data.dataset import DATASET_FORMAT, META, NUMPY_MISSING, SPLITS, DatasetError, file_sha256
from bpe.data.manifest import MANIFEST, VAL_FRACTION, is_sharded, read_manifest

if TYPE_CHECKING:  # numpy and torch are optional: only type checkers see these
    import numpy as np
    import torch

__all__ = ["ShardedTokens", "bits_per_byte", "eval_windows", "get_batch", "load_meta", "load_split",
           "unigram_baseline"]

def _numpy():
    try:
        import numpy
    except ImportError:
        raise ImportError(NUMPY_MISSING) from None
    return numpy


def load_meta(data_dir: os.PathLike | str) -> dict:
    """``meta.json`` of a dataset, checked against the .bin files beside it;
    for a sharded directory (:class:`ShardedTokens`), the same fields made
    from its manifest and its train/val split."""
    data_dir = os.fspath(data_dir)
    if is_sharded(data_dir):
        return ShardedTokens(data_dir).dataset_meta()
    redo = f"re-run `bpe encode FILE... -t TOK --out {data_dir}`"
    path = os.path.join(data_dir, META)
    if not os.path.isdir(data_dir):
        raise DatasetError(f"{data_dir} is not a directory; make a dataset with `bpe encode FILE... -t TOK --out {data_dir}`")
    if not os.path.exists(path):
        if not any(os.path.exists(os.path.join(data_dir, f"{s}.bin")) for s in SPLITS):
            raise DatasetError(f"{data_dir} is not a dataset (it has no {META}); make one with "
                               f"`bpe encode FILE... -t TOK --out {data_dir}`")
        raise DatasetError(f"{path} is missing: the dataset is incomplete (an interrupted write?); {redo}")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except ValueError:
        raise DatasetError(f"{path} is not valid JSON; {redo}") from None
    if not isinstance(meta, dict) or meta.get("format") != DATASET_FORMAT:
        raise DatasetError(f"{path} is not a {DATASET_FORMAT} file; {redo}")
    width = {"uint16": 2, "uint32": 4}.get(meta.get("dtype"))
    if width is None:
        raise DatasetError(f"{path}: unknown dtype {meta.get('dtype')!r}; {redo}")
    for split in SPLITS:
        info = meta["splits"][split]
        bin_path = os.path.join(data_dir, info["file"])
        expected = info["tokens"] * width
        actual = os.path.getsize(bin_path) if os.path.exists(bin_path) else None
        if actual != expected:
            raise DatasetError(
                f"{bin_path} has {'no file' if actual is None else f'{actual} bytes'}, but {META} says "
                f"{info['tokens']} {meta['dtype']} tokens ({expected} bytes): the dataset was modified "
                f"or only partly written; {redo}"
            )
    return meta


def load_split(data_dir: os.PathLike | str, split: str = "train") -> "np.memmap | ShardedTokens":
    """The ids of one split as a read-only ``np.memmap`` (nothing is read
    into memory until used); of a sharded directory, a :class:`ShardedTokens`
    view (the split of :meth:`ShardedTokens.split`)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    if is_sharded(data_dir):
        part = ShardedTokens(data_dir).split()[SPLITS.index(split)]
        if not len(part):
            raise DatasetError(f"{data_dir}: the {split} split is empty; encode more text")
        return part
    np = _numpy()
    meta = load_meta(data_dir)
    dtype = np.dtype(meta["dtype"]).newbyteorder("<")
    info = meta["splits"][split]
    if info["tokens"] == 0:
        raise DatasetError(f"{data_dir}: the {split} split is empty; re-encode with a larger --val-fraction")
    return np.memmap(os.path.join(os.fspath(data_dir), info["file"]), dtype=dtype, mode="r")


def get_batch(
    data: "np.ndarray | ShardedTokens",
    batch_size: int,
    block_size: int,
    *,
    generator: "torch.Generator | None" = None,
    device: "str | torch.device" = "cpu",
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """``batch_size`` random windows of ``data`` (e.g. from :func:`load_split`):
    ``x`` (B, T) int64 ids and ``y`` (B, T), the next id after each of ``x``'s,
    so ``y[:, :-1] == x[:, 1:]``. Pass a ``torch.Generator`` to make the draw
    reproducible (training saves its state in checkpoints)."""
    import torch

    np = _numpy()
    n = len(data)
    if n < block_size + 1:
        raise ValueError(
            f"the data has {n} tokens, fewer than block_size + 1 = {block_size + 1}; "
            f"use a smaller --block-size or more text"
        )
    # Start offsets: any window of block_size + 1 ids that fits.
    starts = torch.randint(n - block_size, (batch_size,), generator=generator).tolist()
    # One small copy per row (B rows, not corpus bytes); int64 is what
    # nn.Embedding and cross_entropy take.
    rows = np.stack([np.asarray(data[i : i + block_size + 1], dtype=np.int64) for i in starts])
    xy = torch.from_numpy(rows)  # (B, T+1)
    x, y = xy[:, :-1], xy[:, 1:]  # (B, T), (B, T)
    device = torch.device(device)
    if device.type == "cuda":
        # Pinned host memory lets the copy run while the GPU computes.
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.contiguous(), y.contiguous()


def eval_windows(data: "np.ndarray", block_size: int, max_windows: int | None = None) -> list[int]:
    """Start offsets of evenly spread, non-overlapping windows of
    ``block_size + 1`` ids covering ``data``: all of them, or ``max_windows``
    spread over the whole split. Deterministic, so that successive
    validation losses are measured on the same tokens and no random state
    is consumed."""
    n_windows = (len(data) - 1) // block_size
    if n_windows < 1:
        raise ValueError(
            f"the validation split has {len(data)} tokens, fewer than block_size + 1 = {block_size + 1}; "
            f"use a smaller --block-size or a larger --val-fraction"
        )
    if max_windows is None or max_windows >= n_windows:
        return [i * block_size for i in range(n_windows)]
    step = n_windows / max_windows
    return [int(k * step) * block_size for k in range(max_windows)]


def unigram_baseline(data_dir: os.PathLike | str) -> dict:
    """The loss of the best model that ignores context: the cross-entropy of
    the val tokens under the train split's token frequencies (add-one
    smoothed over the vocabulary). A model must beat this to have learned
    anything beyond token frequencies. Returns nats/token and bits/byte."""
    np = _numpy()
    meta = load_meta(data_dir)
    n_vocab = meta["tokenizer"]["n_vocab"]
    train, val = load_split(data_dir, "train"), load_split(data_dir, "val")
    counts = _bincount(np, train, n_vocab).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    val_counts = _bincount(np, val, n_vocab)
    nats = float(-(val_counts * logp).sum() / len(val))
    return {"nats_per_token": nats, "bits_per_byte": bits_per_byte(nats, meta, "val")}


def _bincount(np, data, n_vocab: int):
    if isinstance(data, ShardedTokens):  # shard by shard: never the whole split in memory
        return sum((np.bincount(c, minlength=n_vocab) for c in data.chunks()), np.zeros(n_vocab, np.int64))
    return np.bincount(data, minlength=n_vocab)


def bits_per_byte(nats_per_token: float, meta: dict, split: str = "val") -> float:
    """Converts a loss in nats/token to bits per byte of the split's text:
    the total information over the split's bytes. Unlike nats/token it does
    not depend on how much text a token holds, so tokenizers of different
    vocabulary sizes can be compared."""
    info = meta["splits"][split]
    return nats_per_token * info["tokens"] / (info["bytes"] * math.log(2))


# -- a directory of shards, as one sequence ----------------------------------------


class ShardedTokens:
    """The ids of a sharded directory (``shard-NNNNN.bin`` + ``manifest.json``,
    see docs/formats.md#the-shard-manifest) as one sequence, without reading it:
    each shard is memory-mapped (numpy), and ``len``, ``x[i]`` and
    ``x[a:b]`` (an array, copied only where it crosses shards) work on the
    concatenation, which is the single-process encoding of the input. Works
    with :func:`get_batch` (random windows) like a split of a dataset.

    ``verify=True`` (or :meth:`verify`) checks every shard's sha256 against
    the manifest; the sizes are always checked.
    """

    def __init__(self, data_dir: os.PathLike | str, *, verify: bool = False):
        np = _numpy()
        self.dir = os.fspath(data_dir)
        redo = f"re-run `bpe encode FILE... -t TOK --out {self.dir} --engine ray` (or --resume it)"
        m = read_manifest(self.dir)
        self.manifest = m
        dtype = np.dtype(m["dtype"]).newbyteorder("<")
        self._maps, self._offsets = [], [0]
        for s in m["shards"]:
            bin_path = os.path.join(self.dir, s["file"])
            expected = s["tokens"] * dtype.itemsize
            actual = os.path.getsize(bin_path) if os.path.exists(bin_path) else None
            if actual != expected:
                raise DatasetError(f"{bin_path} has {'no file' if actual is None else f'{actual} bytes'}, but "
                                   f"{MANIFEST} says {s['tokens']} tokens ({expected} bytes); {redo}")
            self._maps.append(np.memmap(bin_path, dtype=dtype, mode="r") if s["tokens"] else np.zeros(0, dtype))
            self._offsets.append(self._offsets[-1] + s["tokens"])
        self._start, self._stop = 0, self._offsets[-1]
        if verify:
            self.verify()

    def verify(self) -> None:
        """Checks each shard's sha256 against the manifest (reads them all)."""
        for s in self.manifest["shards"]:
            bin_path = os.path.join(self.dir, s["file"])
            if file_sha256(bin_path) != s["sha256"]:
                raise DatasetError(f"{bin_path}: its sha256 is not the one {MANIFEST} records: the shard was "
                                   f"modified or damaged; encode it again with --resume")

    def __len__(self) -> int:
        return self._stop - self._start

    def view(self, start: int, stop: int) -> ShardedTokens:
        """Tokens ``start`` to ``stop`` of this view, as a view (nothing copied)."""
        start, stop, _ = slice(start, stop).indices(len(self))
        v = object.__new__(ShardedTokens)
        v.__dict__.update(self.__dict__)
        v._start, v._stop = self._start + start, self._start + max(start, stop)
        return v

    def chunks(self):
        """The view's ids as consecutive arrays (one per shard it touches)."""
        import bisect

        k = bisect.bisect_right(self._offsets, self._start) - 1
        pos = self._start
        while pos < self._stop and k < len(self._maps):
            lo, hi = self._offsets[k], self._offsets[k + 1]
            if hi > pos:
                yield self._maps[k][pos - lo : min(hi, self._stop) - lo]
                pos = min(hi, self._stop)
            k += 1

    def __getitem__(self, key):
        np = _numpy()
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise ValueError("ShardedTokens slices take no step; use np.asarray(x[a:b])[::step]")
            parts = list(self.view(key.start, key.stop).chunks())
            if len(parts) == 1:
                return parts[0]
            return np.concatenate(parts) if parts else self._maps[0][:0] if self._maps else np.zeros(0, np.uint16)
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            raise TypeError(f"ShardedTokens indices are ints or slices, not {type(key).__name__}")
        i = int(key) + (len(self) if key < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"index {key} out of range for {len(self)} tokens")
        return self[i : i + 1][0]

    def __array__(self, dtype=None, copy=None):
        np = _numpy()
        out = self[0 : len(self)]
        return np.asarray(out, dtype=dtype) if dtype is not None else np.asarray(out)

    def split(self, val_fraction: float = VAL_FRACTION) -> tuple[ShardedTokens, ShardedTokens]:
        """(train, val): the last ``val_fraction`` of the tokens (rounded up)
        is val, the rest train, the rule ``bpe gpt train`` uses."""
        if not 0 <= val_fraction < 1:
            raise ValueError(f"val_fraction must be at least 0 and below 1, got {val_fraction}")
        cut = len(self) - math.ceil(len(self) * val_fraction)
        return self.view(0, cut), self.view(cut, len(self))

    def text_bytes(self) -> int:
        """The input bytes behind this view: exact for whole shards, in
        proportion to the tokens for a shard the view cuts."""
        total = 0.0
        for k, s in enumerate(self.manifest["shards"]):
            lo, hi = self._offsets[k], self._offsets[k + 1]
            overlap = min(hi, self._stop) - max(lo, self._start)
            if overlap > 0:
                total += s["bytes"] * overlap / (hi - lo)
        return int(round(total))

    def sample(self, batch_size: int, block_size: int, *, generator=None, device="cpu"):
        """Random windows for training: :func:`get_batch` on this view."""
        return get_batch(self, batch_size, block_size, generator=generator, device=device)

    def dataset_meta(self, val_fraction: float = VAL_FRACTION) -> dict:
        """What ``meta.json`` says of a dataset, for this directory split by
        :meth:`split`: dtype, tokenizer, and tokens and bytes per split."""
        train, val = self.split(val_fraction)
        m = self.manifest
        return {"format": m["format"], "dtype": m["dtype"], "byte_order": "little", "tokenizer": m["tokenizer"],
                "split": {"val_fraction": val_fraction, "how": "the last val_fraction of the tokens to val"},
                "splits": {name: {"tokens": len(part), "bytes": part.text_bytes(), "documents": None}
                           for name, part in (("train", train), ("val", val))},
                "sources": m["sources"]}
