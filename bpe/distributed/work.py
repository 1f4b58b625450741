"""The work on one shard (``bpe/distributed/plan.py``), the same wherever it runs:
in this process (``--engine local``) or in a Ray task on any machine
(``bpe/distributed/ray.py``). Everything here is a plain function of plain,
picklable values, returning plain values (bytes, dicts), so that Ray can
ship it, run it again after a crash, and hand the result to another task.

- counting: a shard's chunk counts, as the bytes of a ``.bpec`` file (sorted,
  so any number of them merge in one streaming pass: ``merge_tables``);
- encoding: a shard's ids, written to ``shard-NNNNN.bin`` atomically, with a
  small record of what it holds (tokens, documents, sha256) beside it, so a
  resumed run can trust it without encoding it again.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

from bpe import _core
from bpe.sources.corpus import feed_texts
from bpe.counts import Counts, capped_trainer, feed_capped
from bpe.data.dataset import file_sha256
from bpe.data.manifest import SHARDS_FORMAT, record_path, shard_name
from bpe._util.files import atomic_write_text, temp_path
from bpe.distributed.plan import Shard
from bpe.sources.paths import SourceOptions

def read_range(shard: Shard) -> str:
    """The text of a piece of a plain-text file. Pieces end at safe cut
    points (always between characters), so each decodes on its own."""
    end = shard.end if shard.end is not None else os.path.getsize(shard.path)
    with open(shard.path, "rb") as f:
        f.seek(shard.start)
        data = f.read(end - shard.start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{shard.path}: not UTF-8 at byte offset {shard.start + e.start}; "
                         f"give UTF-8 text files") from None


def count_shard(shard: Shard, pattern: str, options: SourceOptions, max_memory=None,
                kill_marker: str | None = None) -> tuple[bytes, dict]:
    """The counts of one shard as ``.bpec`` bytes, and {"skipped": bad
    records skipped, "total": chunk occurrences}. A whole file is read by the
    core as ``bpe.count`` reads it; a piece is decoded here and counted by
    the core as one document (the pieces' chunks are the file's)."""
    kill_once(kill_marker, shard.index)
    trainer = capped_trainer(pattern, max_memory)
    try:
        skipped = 0
        if shard.end is None:
            fed = feed_capped(trainer, [Path(shard.path)], False, options)
            skipped = sum(fed.skipped.values())
        else:
            feed_texts(trainer, [read_range(shard)])
        counts = Counts(trainer, pattern)
        return table_bytes(counts), {"skipped": skipped, "total": counts.total()}
    finally:
        trainer.discard_spilled()


def table_bytes(counts: Counts) -> bytes:
    with tempfile.TemporaryFile(prefix="bpe-shard-") as f:
        counts._trainer.save_counts(f.fileno(), "<shard counts>")
        f.seek(0)
        return f.read()


def merge_tables(*tables: bytes) -> bytes:
    """The sum of several ``.bpec`` tables (bytes), as bytes: a streaming
    merge of the sorted files (``Counts.merge_files``)."""
    if len(tables) == 1:
        return tables[0]
    with tempfile.TemporaryDirectory(prefix="bpe-merge-") as d:
        paths = []
        for i, t in enumerate(tables):
            paths.append(os.path.join(d, f"{i}.bpec"))
            with open(paths[-1], "wb") as f:
                f.write(t)
        out = os.path.join(d, "merged.bpec")
        Counts.merge_files(paths, out)
        with open(out, "rb") as f:
            return f.read()


# -- encoding --------------------------------------------------------------------


def encode_shard(tok, shard: Shard, out_dir: str, job: dict) -> dict:
    """Encodes ``shard`` with ``tok`` into ``out_dir/shard-NNNNN.bin``
    (written to a temporary file, renamed when complete) and returns its
    manifest entry. ``job``: ``lead`` (True: an end-of-text id first, as the
    shard starts a document and documents precede it), ``separator``,
    ``allowed``/``disallowed`` special tokens, ``width``, ``threads``,
    ``options``, ``tokenizer_sha256``."""
    kill_once(job.get("_kill_once"), shard.index)
    final = os.path.join(out_dir, shard_name(shard.index))
    tmp = temp_path(final)
    sep, width, threads = job["separator"], job["width"], job["threads"]
    allowed, disallowed, options = job["allowed"], job["disallowed"], job["options"]
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        lead = job["lead"] and shard.doc_start and sep is not None
        if lead:
            os.write(fd, sep.to_bytes(width, "little"))
        skipped = 0
        if shard.end is not None:  # a piece of a text file, read by the core
            os.close(fd)
            fd = -1
            (ids,) = _core.write_ids(tok._core, [(shard.path, shard.start, shard.end, 0, True)], [tmp],
                                     allowed, None, threads, width, 16 << 20, None, disallowed)
            documents = 1 if shard.doc_start else 0
        elif shard.kind == "text":
            (ids,) = _core.encode_to_fd(tok._core, [shard.path], fd, "binary", allowed, disallowed, sep,
                                        threads, width, None)
            documents = 1
        elif shard.kind == "jsonl":
            per_file, skips = _core.encode_records_to_fd(tok._core, [shard.path], options.field_path,
                                                         options.skip_bad, fd, "binary", allowed, disallowed,
                                                         sep, threads, width, None)
            (documents, ids), skipped = per_file[0], skips[0]
        else:
            from bpe.sources import arrow as arrow_sources

            documents, ids, skipped = arrow_sources.encode_arrow_to_fd(
                tok, shard.path, fd, "binary", column=options.text_field, name=shard.path,
                skip_bad=options.skip_bad, allowed_special=allowed, disallowed_special=disallowed,
                separator=sep, num_threads=threads, width=width)
        if fd >= 0:
            os.fsync(fd)
            os.close(fd)
            fd = -1
        if lead and documents == 0:  # no document after all: no separator
            os.truncate(tmp, 0)
        tokens = ids + (1 if lead and documents else 0)
        entry = {"file": shard_name(shard.index), **shard.key(), "bytes": shard.size, "documents": documents,
                 "tokens": tokens, "skipped": skipped, "lead_separator": bool(lead and documents),
                 "sha256": file_sha256(tmp)}
        os.replace(tmp, final)
        atomic_write_text(record_path(final), json.dumps({"format": SHARDS_FORMAT,
                                                          "tokenizer_sha256": job["tokenizer_sha256"],
                                                          **entry}) + "\n")
        return entry
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def done_entry(out_dir: str, shard: Shard, lead: bool, tokenizer_sha: str) -> dict | None:
    """The manifest entry of a shard a previous run completed (``--resume``):
    its record names the same input, tokenizer and leading separator, and
    the file's sha256 is the recorded one. Else None (encode it again)."""
    final = os.path.join(out_dir, shard_name(shard.index))
    try:
        with open(record_path(final), encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    if (not isinstance(rec, dict) or rec.get("format") != SHARDS_FORMAT
            or rec.get("tokenizer_sha256") != tokenizer_sha
            or any(rec.get(k) != v for k, v in shard.key().items())
            or (rec.get("lead_separator") is True) != (lead and bool(rec.get("documents")) and shard.doc_start)):
        return None
    if not os.path.isfile(final) or file_sha256(final) != rec.get("sha256"):
        return None
    rec.pop("format")
    rec.pop("tokenizer_sha256")
    return rec


# -- fault injection (tests) ----------------------------------------------------------


def kill_once(marker_dir: str | None, index: int) -> None:
    """Tests only: the first attempt at shard ``index`` kills its own
    process (SIGKILL, as a machine lost mid-task), leaving a marker so the
    retry runs normally. ``marker_dir`` None: nothing."""
    if not marker_dir:
        return
    marker = os.path.join(marker_dir, f"killed-{index}")
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
