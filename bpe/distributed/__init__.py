"""Past one process: a corpus cut into shards whose results add up exactly
to those of the whole (``plan.py``), the work on one shard wherever it runs
(``work.py``), the sharded encoder's driver and its in-process engine
(``local.py``), and Ray (``ray.py``, the ``ray`` extra: ``pip install
'bpe[ray]'``) for counting, training and encoding on a cluster, with the
same bytes as one process.
"""

from bpe.distributed.local import encode_local
from bpe.distributed.ray import RAY_MISSING, Cluster, count, encode, train

__all__ = ["RAY_MISSING", "Cluster", "count", "encode", "encode_local", "train"]
