"""Counting, training and encoding on a Ray cluster (the ``ray`` extra:
``pip install 'bpe[ray]'``), with results byte-identical to one process.

Tokenizer training is map-reduce by nature:

- map: each shard of the corpus (``bpe/distributed/plan.py``: a file, or a byte
  range of a large text file cut where no chunk crosses) is counted by a Ray
  task into a sorted count table (``bpe/distributed/work.py``);
- reduce: tables are merged in a tree, a few at a time, by tasks (the driver
  never holds more than the final table), and the sum of counts is the same
  whatever the grouping or the order the shards finished in;
- the merge loop runs once, here, on that table
  (``Tokenizer.train_from_counts``): the tokenizer is the one
  ``Tokenizer.train`` makes from the whole corpus, byte for byte.

Encoding is a plain map: each shard's ids go to ``OUT/shard-NNNNN.bin``,
and ``OUT/manifest.json`` lists them in corpus order. Concatenated, the shards
are the ids of the single-process encoding, documents separated by the
end-of-text id.

Faults: tasks are retried by Ray when their worker dies (``max_retries``),
and a retry recomputes exactly what the lost attempt would have. A bad input
(missing file, bad record) fails the run with one error naming the file.

Ray is imported only when used; without ``address`` a local Ray is started
(and stopped again); with ``address="auto"`` or ``"ray://host:10001"`` an
existing cluster is joined. A Ray already initialized by the caller is used
as it is and left running. Paths (inputs, the output directory) must be
reachable under the same names from every node (a shared file system).
"""

from __future__ import annotations

import logging
import os
from typing import Any
import warnings

from bpe.distributed import work as shardwork
from bpe.counts import Counts, check_progress, parse_memory
from bpe._util.patterns import resolve_pattern
from bpe.progress import ClusterProgress
from bpe.distributed.plan import SHARD_BYTES, Shard, plan
from bpe.distributed.local import EncodeJob, encode_sharded
from bpe.sources.paths import SourceOptions, skipped_message
from bpe._util.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer

RAY_MISSING = "the Ray engine needs ray: pip install 'bpe[ray]'"

#: How many count tables one merge task sums (the tree's fan-in).
FAN_IN = 4
#: Ray retries a task whose worker died this many times.
MAX_RETRIES = 3


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError(RAY_MISSING) from None
    return ray


def _check_workers(num_workers) -> int | None:
    if num_workers is None:
        return None
    if isinstance(num_workers, bool) or not isinstance(num_workers, int):
        raise TypeError(f"num_workers must be an int (or None: every CPU), not {type(num_workers).__name__}")
    if num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    return num_workers


class Cluster:
    """The Ray to run on, for the length of a ``with`` block: the one the
    caller initialized, else a new one (local without ``address``, else the
    cluster at ``address``) that is shut down at the end. ``slots``: how
    many tasks run at once (``num_workers``, default every CPU of the
    cluster)."""

    def __init__(self, address: str | None = None, num_workers: int | None = None, shuffle: int | None = None):
        if address is not None and not isinstance(address, str):
            raise TypeError(f"address must be a str such as 'auto' or 'ray://host:10001', not {type(address).__name__}")
        self.address, self.num_workers = address, _check_workers(num_workers)
        self.ray: Any = None  # the ray module, once entered
        self.own, self.slots = False, 1
        self.shuffle = shuffle  # tests: a seed to submit shards in a random order

    def order(self, items: list) -> list:
        """``items`` in the order to submit them: as given, or (tests) shuffled."""
        items = list(items)
        if self.shuffle is not None:
            import random

            random.Random(self.shuffle).shuffle(items)
        return items

    def __enter__(self) -> Cluster:
        ray = self.ray = _ray()
        if not ray.is_initialized():
            kwargs = {"num_cpus": self.num_workers} if self.address is None and self.num_workers else {}
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR, **kwargs)
            self.own = True
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        self.slots = min(self.num_workers or cpus, cpus)
        return self

    def __exit__(self, *exc) -> None:
        if self.own:
            self.ray.shutdown()

    def remote(self, fn, num_returns: int = 1):
        """``fn`` as a Ray task of one CPU, retried if its worker dies."""
        # One CPU a task: the cluster's CPUs are the parallelism.
        return self.ray.remote(num_cpus=1, max_retries=MAX_RETRIES, num_returns=num_returns)(fn)

    def wait(self, refs):
        """The references among ``refs`` that are ready, once at least one is."""
        ready, _ = self.ray.wait(list(refs), num_returns=1)
        return ready

    def get(self, ref):
        """``ray.get``, a task's own error raised as itself (one line, naming
        the file), a lost worker as a RuntimeError."""
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise RuntimeError(f"a Ray task failed: {str(e).splitlines()[0]}") from None
        except ray.exceptions.RayError as e:
            raise RuntimeError(f"Ray lost a task ({type(e).__name__}: {str(e).splitlines()[0]}); "
                               f"run again (encoding: with --resume)") from None

    def cancel(self, refs, *, wait: bool = False) -> None:
        """Cancels tasks not yet started; with ``wait``, also waits (a
        minute at most) for those already running to end, so that nothing
        they write comes after the caller's clean-up."""
        refs = list(refs)
        for ref in refs:
            try:
                self.ray.cancel(ref)
            except Exception:  # already finished, or the cluster is gone
                pass
        if wait and refs:
            try:
                self.ray.wait(refs, num_returns=len(refs), timeout=60)
            except Exception:
                pass


# -- tasks (plain functions; Ray ships them by reference to this module) --------


def _one_thread() -> None:
    # A task has one CPU: the core's thread pools should not take them all.
    os.environ["RAYON_NUM_THREADS"] = "1"


def _count_task(shard, pattern, options, max_memory, kill_marker):
    _one_thread()
    table, info = shardwork.count_shard(shard, pattern, options, max_memory, kill_marker)
    return table, info


def _merge_task(*tables):
    return shardwork.merge_tables(*tables)


def _encode_task(tok, shard, out_dir, job):
    return shardwork.encode_shard(tok, shard, out_dir, job)


# -- counting ----------------------------------------------------------------------


def count(source, *, address: str | None = None, num_workers: int | None = None, pattern: str = "gpt4",
          max_memory: int | str | None = None, progress: bool | None = None, text_field: str = "text",
          skip_bad: bool = False, shard_size: int = SHARD_BYTES, input_format: str = "auto",
          _kill_once: str | None = None, _shuffle: int | None = None) -> Counts:
    """``bpe.count`` on a Ray cluster: the same ``Counts``, byte for byte
    when saved, for any number of workers and any order the shards finish
    in. ``source``: a path (file, directory, glob) or a list of them, read
    by every node under the same name. ``address``: None (start a local
    Ray: ``num_workers`` CPUs, default all), ``"auto"`` or
    ``"ray://host:port"`` (join that cluster). ``max_memory`` caps each
    task's counting maps. ``shard_size``: plain-text files larger than this
    (bytes) are counted in pieces. ``input_format``: how to read the files
    ("auto": by their names; "text", "jsonl", "parquet")."""
    pattern = resolve_pattern(pattern)
    progress = check_progress(progress)
    options = SourceOptions(text_field=text_field, skip_bad=skip_bad, input_format=input_format)
    parse_memory(max_memory)
    shards = plan(source, options, pattern, shard_size)
    with Cluster(address, num_workers, _shuffle) as cluster:
        table, skipped = _count_on(cluster, shards, pattern, options, max_memory, progress, _kill_once)
        counts = _load_table(table)
    message = skipped_message(skipped)
    if message:
        warnings.warn(message, stacklevel=2)
    if sum(s.size for s in shards) == 0:
        raise ValueError(f"the corpus is empty ({len(shards)} empty file(s)): there is nothing to count")
    return counts


def _count_on(cluster: Cluster, shards: list[Shard], pattern, options, max_memory, progress, kill):
    """Counts the shards, at most ``cluster.slots`` tasks at a time, and
    merges the tables in a tree as they come: returns the final table
    (bytes) and the bad records skipped per file."""
    count_task = cluster.remote(_count_task, num_returns=2)
    merge_task = cluster.remote(_merge_task)
    todo = cluster.order(shards)
    running: dict = {}  # the ref waited on -> ("count", shard, table ref) or ("merge", None, None)
    tables: list = []  # refs of finished tables, not yet merged
    skipped: dict[str, int] = {}
    bar = ClusterProgress("counting on Ray", len(shards), sum(s.size for s in shards), progress)
    done = done_bytes = 0
    try:
        while todo or running or len(tables) > 1:
            while todo and len(running) < cluster.slots:
                shard = todo.pop(0)
                table_ref, info_ref = count_task.remote(shard, pattern, options, max_memory, kill)
                running[info_ref] = ("count", shard, table_ref)
            # Merge as soon as FAN_IN tables wait (or, at the end, whatever is left).
            while len(tables) >= FAN_IN or (len(tables) > 1 and not todo and not running):
                group, tables[:] = tables[:FAN_IN], tables[FAN_IN:]
                running[merge_task.remote(*group)] = ("merge", None, None)
            if not running:
                break
            for ref in cluster.wait(running):
                kind, shard, table_ref = running.pop(ref)
                if kind == "count":
                    info = cluster.get(ref)
                    if info["skipped"]:
                        skipped[shard.path] = skipped.get(shard.path, 0) + info["skipped"]
                    tables.append(table_ref)
                    done, done_bytes = done + 1, done_bytes + shard.size
                    bar.update(done, done_bytes)
                else:
                    # Not fetched: a failed merge fails the merge (or the
                    # final get) that takes its table, with its own error.
                    tables.append(ref)
        bar.finish()
        return cluster.get(tables[0]), skipped
    except BaseException:
        cluster.cancel(running)
        raise


def _load_table(table: bytes) -> Counts:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bpe-ray-") as d:
        path = os.path.join(d, "counts.bpec")
        with open(path, "wb") as f:
            f.write(table)
        return Counts.load(path)


def train(source, vocab_size: int, *, address: str | None = None, num_workers: int | None = None,
          pattern: str = "gpt4", special_tokens=(ENDOFTEXT,), progress: bool | None = None,
          text_field: str = "text", skip_bad: bool = False, max_memory: int | str | None = None,
          min_frequency: int | None = None, shard_size: int = SHARD_BYTES, input_format: str = "auto") -> Tokenizer:
    """``Tokenizer.train`` on a Ray cluster: the counting is spread over
    the cluster (:func:`count`), the merge loop runs once, here, on the
    merged counts. The tokenizer is the one ``Tokenizer.train`` makes from
    the same files, byte for byte."""
    Tokenizer._training_args(vocab_size, special_tokens, progress)  # bad arguments fail before the counting
    counts = count(source, address=address, num_workers=num_workers, pattern=pattern, max_memory=max_memory,
                   progress=progress, text_field=text_field, skip_bad=skip_bad, shard_size=shard_size,
                   input_format=input_format)
    return Tokenizer.train_from_counts(counts, vocab_size, special_tokens=special_tokens,
                                       min_frequency=min_frequency, progress=progress)


# -- encoding ----------------------------------------------------------------------

def encode(tok: Tokenizer, source, out_dir, *, address: str | None = None, num_workers: int | None = None,
           resume: bool = False, separator="eot", shard_size: int = SHARD_BYTES, allowed_special=(),
           disallowed_special="all", text_field: str = "text", skip_bad: bool = False, input_format: str = "auto",
           progress: bool | None = None, tokenizer_name: str | None = None, _kill_once: str | None = None,
           _shuffle: int | None = None) -> dict:
    """Encodes ``source`` (paths, as for :func:`count`) with ``tok`` on a
    Ray cluster into ``out_dir``: ``shard-NNNNN.bin`` files and
    ``manifest.json`` (docs/formats.md, "The shard manifest"); returns the
    manifest. ``separator``: the id between documents (default ``"eot"``:
    the tokenizer's ``<|endoftext|>``; None: nothing). ``resume``: keep the
    shards a previous run completed (same input, same tokenizer, checksum
    intact) and encode only the rest. Special-token text as in
    ``Tokenizer.encode``. The concatenated shards are the ids one process
    writes (``bpe encode --format numpy``), for any number of workers."""
    job = EncodeJob.make(tok, source, out_dir, separator=separator, shard_size=shard_size,
                         allowed_special=allowed_special, disallowed_special=disallowed_special,
                         options=SourceOptions(text_field=text_field, skip_bad=skip_bad, input_format=input_format),
                         tokenizer_name=tokenizer_name, kill_marker=_kill_once)
    with Cluster(address, num_workers, _shuffle) as cluster:
        return encode_sharded(job, _RayEncoder(cluster, tok), resume=resume, progress=check_progress(progress))


class _RayEncoder:
    """Runs shard encodings as Ray tasks, ``cluster.slots`` at a time."""

    what = "encoding on Ray"

    def __init__(self, cluster: Cluster, tok: Tokenizer):
        self.cluster, self.task = cluster, cluster.remote(_encode_task)
        self.tok_ref = cluster.ray.put(tok)  # shipped once, not with every task

    def run(self, work, on_done) -> None:
        """``work``: (shard, job dict) pairs; ``on_done(shard, entry)`` as each finishes."""
        todo = self.cluster.order(work)
        running: dict = {}
        try:
            while todo or running:
                while todo and len(running) < self.cluster.slots:
                    shard, job = todo.pop(0)
                    running[self.task.remote(self.tok_ref, shard, job["out_dir"], job)] = shard
                for ref in self.cluster.wait(running):
                    shard = running.pop(ref)
                    on_done(shard, self.cluster.get(ref))
        except BaseException:
            self.cluster.cancel(running, wait=True)
            raise
