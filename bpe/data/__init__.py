"""Token datasets on disk: writing them from a corpus and reading them back
for a training loop.

Two layouts, both read as one sequence of ids:

- ``DIR/train.bin`` + ``DIR/val.bin`` + ``DIR/meta.json`` (``bpe encode --out DIR``):
  :func:`write_dataset` in ``dataset.py``;
- ``DIR/shard-NNNNN.bin`` + ``DIR/manifest.json`` (``--format shards``, ``--engine ray``):
  the format in ``manifest.py``, written by ``bpe/distributed/``.

``reading.py`` reads both (:func:`load_split`, :func:`get_batch`,
:class:`ShardedTokens`: numpy, and torch for batches); ``streams.py`` encodes
and decodes streams of ids for the command line.
"""

from bpe.data.dataset import (DATASET_FORMAT, META, SPLITS, DatasetError, dtype_for, file_sha256, tokenizer_sha256,
                              write_dataset)
from bpe.data.manifest import MANIFEST, SHARDS_FORMAT, is_sharded
from bpe.data.reading import (ShardedTokens, bits_per_byte, eval_windows, get_batch, load_meta, load_split,
                              unigram_baseline)

__all__ = [
    "DATASET_FORMAT", "DatasetError", "MANIFEST", "META", "SHARDS_FORMAT", "SPLITS", "ShardedTokens",
    "bits_per_byte", "dtype_for", "eval_windows", "file_sha256", "get_batch", "is_sharded", "load_meta",
    "load_split", "tokenizer_sha256", "unigram_baseline", "write_dataset",
]
