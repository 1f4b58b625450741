"""Sharded token output: ``OUT/shard-NNNNN.bin`` + ``OUT/manifest.json``,
written by either engine (this process, or Ray tasks: ``bpe/distributed/ray.py``)
with the same bytes.

Each shard holds the ids of one shard of the input (``bpe/distributed/plan.py``),
flat little-endian uint16 or uint32 (``bpe.data.dataset.dtype_for``), no header.
Concatenated in manifest order they are the single-process encoding of the
input (``bpe encode --format numpy``): documents (a text file, or a record)
separated by the separator id (by default ``<|endoftext|>``). A shard that
starts a document, when documents precede it, begins with that separator.

Whether documents precede a shard is known before encoding except after
record files (a JSON Lines file may hold no record): it is predicted from
the sizes and checked when every shard is done; the rare shard predicted
wrongly is encoded again. The manifest is written last, atomically: a
directory without one is incomplete (``--resume`` finishes it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from bpe.data.dataset import _fsync_dir, _prepare_dir, dtype_for, tokenizer_sha256
from bpe._util.files import atomic_write_text
from bpe.progress import ClusterProgress
from bpe.distributed.plan import SHARD_BYTES, Shard, plan
from bpe.data.manifest import MANIFEST, make_manifest, record_path, remove_shard_files, shard_name
from bpe.distributed.work import done_entry, encode_shard
from bpe.sources.paths import SourceOptions, skipped_message
from bpe._util.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer



@dataclass
class EncodeJob:
    """Everything an encoding of shards needs, checked up front."""

    tok: Tokenizer
    shards: list[Shard]
    out_dir: str
    separator: int | None
    allowed: list[str]
    disallowed: list[str]
    options: SourceOptions
    dtype: str
    tokenizer_name: str
    sources: list[str] = field(default_factory=list)
    kill_marker: str | None = None

    @classmethod
    def make(cls, tok, source, out_dir, *, separator="eot", shard_size=SHARD_BYTES, allowed_special=(),
             disallowed_special="all", options=None, tokenizer_name=None, kill_marker=None) -> EncodeJob:
        if not isinstance(tok, Tokenizer):
            raise TypeError(f"tok must be a bpe.Tokenizer, not {type(tok).__name__}; load one with Tokenizer.load")
        if not isinstance(out_dir, (str, os.PathLike)):
            raise TypeError(f"out_dir must be a directory path, not {type(out_dir).__name__}")
        if separator == "eot":
            separator = tok.special_tokens.get(ENDOFTEXT)
        elif separator is not None and (isinstance(separator, bool) or not isinstance(separator, int)
                                        or not 0 <= separator < tok.n_vocab):
            raise ValueError(f"separator must be a token id below {tok.n_vocab}, 'eot' or None, not {separator!r}")
        allowed = sorted(tok._allowed(allowed_special))
        disallowed = sorted(tok._disallowed(set(allowed), disallowed_special))
        options = options or SourceOptions()
        shards = plan(source, options, tok.pattern, shard_size)
        srcs = list(dict.fromkeys(s.path for s in shards))
        return cls(tok, shards, os.fspath(out_dir), separator, allowed, disallowed, options,
                   dtype_for(tok.n_vocab), tokenizer_name or "in memory", srcs, kill_marker)

    def task(self, lead: bool, threads: int) -> dict:
        """The plain dict a shard's encoding takes (``shardwork.encode_shard``)."""
        return {"out_dir": self.out_dir, "lead": lead, "separator": self.separator, "allowed": self.allowed,
                "disallowed": self.disallowed, "width": {"uint16": 2, "uint32": 4}[self.dtype],
                "threads": threads, "options": self.options, "tokenizer_sha256": tokenizer_sha256(self.tok),
                "_kill_once": self.kill_marker}


def _predicted_documents(shard: Shard) -> bool:
    # A text file is a document (even empty); a piece after the first
    # continues one; a record file holds records if it has bytes (nearly always).
    return shard.doc_start if shard.kind == "text" else shard.size > 0


class LocalEncoder:
    """Encodes the shards one after another in this process, on all cores."""

    what = "encoding"
    threads = 0

    def __init__(self, tok: Tokenizer):
        self.tok = tok

    def run(self, work, on_done) -> None:
        for shard, job in work:
            on_done(shard, encode_shard(self.tok, shard, job["out_dir"], job))


def encode_sharded(job: EncodeJob, runner, *, resume: bool, progress: bool) -> dict:
    """Encodes ``job``'s shards with ``runner`` (``LocalEncoder`` or the Ray
    one) and writes the manifest; returns it. On a bad input, the shards
    this run wrote are removed (and the directory, if it made it); on an
    interruption they stay, for ``resume``."""
    out_dir = job.out_dir
    created = _prepare_dir(out_dir)
    if not resume:
        remove_shard_files(out_dir)
    elif os.path.exists(os.path.join(out_dir, MANIFEST)):
        os.unlink(os.path.join(out_dir, MANIFEST))  # incomplete again until this run ends
    threads = getattr(runner, "threads", 1)
    tok_sha = tokenizer_sha256(job.tok)
    leads, seen = [], False
    for s in job.shards:
        leads.append(seen)
        seen = seen or _predicted_documents(s)
    entries: dict[int, dict] = {}
    work = []
    for s, lead in zip(job.shards, leads):
        entry = done_entry(out_dir, s, lead, tok_sha) if resume else None
        if entry is not None:
            entries[s.index] = entry
        else:
            work.append((s, job.task(lead, threads)))
    bar = ClusterProgress(runner.what, len(job.shards), sum(s.size for s in job.shards), progress)

    def on_done(shard: Shard, entry: dict) -> None:
        entries[shard.index] = entry
        bar.update(len(entries), sum(job.shards[i].size for i in entries))

    try:
        bar.update(len(entries), sum(job.shards[i].size for i in entries))
        runner.run(work, on_done)
        # The check of the prediction: a shard that starts a document has a
        # separator first exactly when documents come before it.
        redo, seen = [], False
        for s in job.shards:
            e = entries[s.index]
            if e["documents"] and s.doc_start and e["lead_separator"] != (seen and job.separator is not None):
                redo.append((s, job.task(seen, threads)))
            seen = seen or bool(e["documents"])
        if redo:
            runner.run(redo, on_done)
        bar.finish()
        manifest = _manifest(job, [entries[s.index] for s in job.shards], tok_sha)
        atomic_write_text(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=1) + "\n")
        _fsync_dir(out_dir)
        return manifest
    except (ValueError, OSError, TypeError, UnicodeError):
        # A bad input: nothing of this run stays (the runner has waited for
        # the tasks still running, so none writes after this).
        for i in {s.index for s, _ in work}:
            for p in (os.path.join(out_dir, shard_name(i)), record_path(os.path.join(out_dir, shard_name(i)))):
                try:
                    os.unlink(p)
                except OSError:
                    pass
        if created:
            try:
                os.rmdir(out_dir)
            except OSError:
                pass
        raise


def _manifest(job: EncodeJob, entries: list[dict], tok_sha: str) -> dict:
    skipped = {e["source"]: e.get("skipped", 0) for e in entries if e.get("skipped")}
    tokenizer = {"file": job.tokenizer_name, "sha256": tok_sha, "n_vocab": job.tok.n_vocab,
                 "eot": job.tok.special_tokens.get(ENDOFTEXT)}
    return make_manifest(entries, dtype=job.dtype, tokenizer=tokenizer, separator=job.separator,
                         sources=job.sources, skipped_records=skipped_message(skipped))


def encode_local(tok: Tokenizer, source, out_dir, *, resume: bool = False, separator="eot",
                 shard_size: int = SHARD_BYTES, allowed_special=(), disallowed_special="all",
                 text_field: str = "text", skip_bad: bool = False, input_format: str = "auto",
                 progress: bool | None = None, tokenizer_name: str | None = None) -> dict:
    """``bpe.distributed.ray.encode`` in this process (no Ray): the same shards,
    the same manifest, byte for byte."""
    from bpe.counts import check_progress

    job = EncodeJob.make(tok, source, out_dir, separator=separator, shard_size=shard_size,
                         allowed_special=allowed_special, disallowed_special=disallowed_special,
                         options=SourceOptions(text_field=text_field, skip_bad=skip_bad, input_format=input_format),
                         tokenizer_name=tokenizer_name)
    return encode_sharded(job, LocalEncoder(tok), resume=resume, progress=check_progress(progress))
