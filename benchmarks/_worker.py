"""One benchmark job, run by run.py in a fresh child process.

    python benchmarks/_worker.py '<json job>'

A fresh process per job means one tool's memory, thread pools and caches never
colour another's numbers, and peak RSS (ru_maxrss) belongs to that job alone.
The result is one JSON line on stdout, prefixed with RESULT_PREFIX (anchors
may print their own chatter around it).

Jobs:
  {"kind": "train", "tool": ..., "file": ..., "vocab": V, "feed": ..., ...}
      one training run; timed is the training call only (see each tool).
  {"kind": "single", "tool": ..., "encoding": ..., "call": ..., "text": path, "warmup": path or null, "cpus": [c]}
      one single-text call timed once, pinned to one CPU, after a warm-up on
      other text (or none: the cold figure).
  {"kind": "extras", "tool": ..., "encoding": ..., "corpus": [name, path], "warmup": path, "threads": N,
   "repeats": 1}
      batch encoding, decode and short strings on one corpus (a tool's cache
      emptied and warmed on ``warmup`` before each timed encode).
  {"kind": "files", "tool": ..., "encoding": ..., "mode": "files"|"batch", "file": ..., "warmup": ...,
   "threads": N, "cpus": [...]}
      one encode_files (or encode_batch) call on a large file, N threads.
  {"kind": "digest", "encoding": ..., "file": ...}
      tiktoken's ids of a file as a fingerprint: the reference for the ids checks.
  {"kind": "alongside", "tool": ..., "encoding": ..., "text": path, "warmup": path, "cpus": [c],
   "calls": n, "sync": folder}
      the one-thread call timed n times, pinned to one CPU, in step with
      other copies (through ``sync``): several at once, one per CPU, measure
      what the machine's CPUs give together (the batch ratio's ceiling).
"""

from __future__ import annotations

import array
import atexit
import base64
import hashlib
import importlib.util
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path

from _common import ENDOFTEXT, GPT4_PATTERN, batch_docs, cut_at_newlines, short_strings, split_feed

RESULT_PREFIX = "@@bench-result@@ "


class NotInstalled(Exception):
    pass


def _import(module: str):
    try:
        return __import__(module)
    except ImportError as e:
        raise NotInstalled(f"{module}: {e}") from None


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_seconds() -> float:
    # All threads of this process, user + system.
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def timed(fn, *args):
    """(result, wall seconds, CPU seconds) of one call."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = fn(*args)
    t1, c1 = time.perf_counter(), cpu_seconds()
    return out, t1 - t0, c1 - c0


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def ids_digest(ids) -> str:
    """A short fingerprint of a token sequence: equal ids, equal digest,
    whether they come as a list or as a numpy array."""
    if isinstance(ids, list):
        raw = array.array("I", ids).tobytes()  # "I" is 32-bit on every platform we run on
    else:
        raw = ids.astype("uint32").tobytes()
    return hashlib.sha1(raw).hexdigest()[:16]


# --------------------------------------------------------------------------
# training


def train(job: dict) -> dict:
    tool, path, vocab = job["tool"], job["file"], job["vocab"]
    feed = job.get("feed")
    extra: dict = {}

    if tool == "bpe":
        from bpe import Tokenizer

        # From the path: our trainer streams the file itself (reading is timed).
        base = current_rss_mb()
        tok, wall, cpu = timed(
            lambda: Tokenizer.train(Path(path), vocab_size=vocab, pattern="gpt4", progress=False)
        )
        extra = {"version": version("bpe"), "final_vocab": tok.n_vocab, "module": _module_file("bpe")}

    elif tool in ("rustbpe", "bpeasy"):
        mod = _import(tool)
        # The corpus is read and cut BEFORE timing (these trainers take an
        # iterator of str); only the training call is timed. The whole text
        # is dropped once cut, so memory holds one copy of the corpus.
        text = read_text(path)
        items = split_feed(text, feed)
        del text
        base = current_rss_mb()
        if tool == "rustbpe":
            tok = mod.Tokenizer()
            _, wall, cpu = timed(
                lambda: tok.train_from_iterator(iter(items), vocab, pattern=GPT4_PATTERN)
            )
            final = tok.vocab_size
        else:
            # bpeasy requires a maximum token length; 128 bytes never binds on
            # these corpora in practice (our trainer has no such limit).
            v, wall, cpu = timed(lambda: mod.train_bpe(iter(items), GPT4_PATTERN, 128, vocab))
            final = len(v)
            extra["max_token_length"] = 128
        extra.update(version=version(tool), final_vocab=final, feed=feed, items=len(items))

    elif tool == "hf":
        tokenizers = _import("tokenizers")
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(GPT4_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        trainer = trainers.BpeTrainer(
            vocab_size=vocab,
            special_tokens=[ENDOFTEXT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        base = current_rss_mb()
        # From the path, like us: HF reads the file itself (timed).
        _, wall, cpu = timed(lambda: tok.train([path], trainer))
        extra = {"version": tokenizers.__version__, "final_vocab": tok.get_vocab_size()}

    elif tool == "gigatoken":
        gigatoken = _import("gigatoken")
        base = current_rss_mb()
        # From the path, like us: its train_bpe reads the file itself (timed).
        # It has no pattern argument: it splits with its own (GPT-2-like)
        # pre-tokenizer, which the row says.
        (v, merges), wall, cpu = timed(lambda: gigatoken.train_bpe(Path(path), vocab, [ENDOFTEXT]))
        extra = {"version": version("gigatoken"), "final_vocab": len(v), "pattern": "gigatoken's own"}

    elif tool == "sentencepiece":
        spm = _import("sentencepiece")
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "m")
            args = dict(
                input=path,
                model_prefix=prefix,
                model_type="bpe",
                vocab_size=vocab,
                num_threads=job.get("threads") or os.cpu_count(),
                # Use every line (0 = no sampling) and skip none: each line is
                # one "sentence" and longer ones would be dropped silently.
                input_sentence_size=0,
                max_sentence_length=job["max_line_bytes"] + 16,
                user_defined_symbols=[ENDOFTEXT],
                minloglevel=2,
            )
            base = current_rss_mb()
            _, wall, cpu = timed(lambda: spm.SentencePieceTrainer.train(**args))
            sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
            final = sp.get_piece_size()
        extra = {
            "version": version("sentencepiece"),
            "final_vocab": final,
            "max_sentence_length": args["max_sentence_length"],
        }
    else:
        raise ValueError(f"unknown training tool {tool!r}")

    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "cores": cpu / wall if wall > 0 else None,
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_mb": base,
        **extra,
    }


def _module_file(name: str) -> str | None:
    mod = sys.modules.get(name)
    return getattr(mod, "__file__", None)


# --------------------------------------------------------------------------
# encoding: the tools, all driven from here

# What run.py may ask of each tool (make_adapter below says how): its
# single-text calls, each timed in a child process of its own; whether it has
# the batch, short-string and decode calls of the extras job; whether it
# encodes files. A call a build lacks gives a row saying so.
CALLS = {
    "bpe": ("list", "numpy"),
    "gigatoken": ("numpy",),
    "fastokens": ("list", "flat"),
    "toktok": ("list", "numpy"),
    "tiktoken": ("list", "numpy"),
    "riptoken": ("list",),
    "tokendagger": ("list",),
    "bpe-openai": ("list",),
    "hf": ("list",),
    "hf1": ("numpy",),
}
EXTRAS = ("bpe", "tiktoken", "riptoken", "tokendagger", "bpe-openai", "hf", "hf1")
FILES = ("bpe", "gigatoken")


class Unsupported(Exception):
    pass


class Adapter:
    """How one tool is driven. ``prepare`` (untimed) turns a text into what
    its single-text calls take; ``calls`` maps a call's name to the call,
    ``how`` to the words the tables show for it."""

    version = None
    module = None
    batch = None  # (docs, threads) -> list of lists
    files = None  # (path, threads) -> result, untimed: result -> flat ids
    short_encode = None  # str -> ids, default special-token policy
    short_ordinary = None  # str -> ids
    decode = None  # ids -> str
    clear_cache = None  # () -> None, for a tool whose encoder keeps a cache across calls

    def __init__(self):
        self.calls: dict = {}
        self.how: dict = {}

    def prepare(self, text):
        return text

    def add(self, name: str, fn, how: str) -> None:
        self.calls[name] = fn
        self.how[name] = how

    def primary(self):
        """The first call: the one the extras job uses for whole-text ids."""
        return next(iter(self.calls.values()))


def tiktoken_file(encoding: str) -> str:
    """OpenAI's rank file, written from tiktoken's ranks (base64 token, space,
    rank per line) into a temporary folder as ``<encoding>.tiktoken``:
    gigatoken and fastokens take the split pattern and special tokens from
    that name."""
    tiktoken = _import("tiktoken")
    ranks = tiktoken.get_encoding(encoding)._mergeable_ranks
    folder = tempfile.mkdtemp(prefix="bench-vocab-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, f"{encoding}.tiktoken")
    with open(path, "wb") as f:
        for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(base64.b64encode(token) + b" %d\n" % rank)
    return path


def make_adapter(tool: str, encoding: str) -> Adapter:
    a = Adapter()
    if tool == "bpe":
        from bpe import Tokenizer

        tok = Tokenizer.from_tiktoken(encoding)
        a.version = version("bpe")
        a.module = _module_file("bpe")
        a.add("list", tok.encode_ordinary, "encode_ordinary(text) -> list")
        # encode_to_numpy and encode_files are new: measured where this build has them.
        if hasattr(tok, "encode_to_numpy"):
            a.add("numpy", tok.encode_to_numpy, "encode_to_numpy(text) -> uint32 array")
        if hasattr(tok, "encode_files"):
            a.files = (lambda path, t: tok.encode_files([path], num_threads=t), lambda out: out[0])
        # disallowed_special=() gives encode_ordinary's semantics, as
        # tiktoken's encode_ordinary_batch has (the default would also scan
        # every text for special-token text).
        a.batch = lambda docs, t: tok.encode_batch(docs, num_threads=t, disallowed_special=())
        a.short_encode = tok.encode
        a.short_ordinary = tok.encode_ordinary
        a.decode = tok.decode
        a.clear_cache = getattr(tok, "clear_cache", None)
    elif tool == "gigatoken":
        gigatoken = _import("gigatoken")
        g = gigatoken.Tokenizer.from_tiktoken(tiktoken_file(encoding))
        a.version = version("gigatoken")
        a.add("numpy", g.encode, "Tokenizer.from_tiktoken(<enc>.tiktoken).encode(text) -> uint32 array")
        # One file without a separator is one document; the result is an
        # awkward array (one row), flattened untimed for the ids check. Its
        # pool is rayon's global one: run.py sets RAYON_NUM_THREADS.
        a.files = (lambda path, t: g.encode_files(path), _awkward_flat)
    elif tool == "fastokens":
        fastokens = _import("fastokens")
        import numpy as np

        try:
            ft = fastokens.Tokenizer.from_tiktoken(tiktoken_file(encoding), encoding=encoding)
        except ValueError as e:  # its presets: cl100k_base and o200k_base
            raise Unsupported(f"fastokens has no {encoding}: {e}") from None
        a.version = version("fastokens")
        # encode_ordinary gives an Encoding; .ids (a list) is what a caller uses.
        a.add("list", lambda text: ft.encode_ordinary(text).ids, "encode_ordinary(text).ids -> list")
        # Its flat batch call with one text: ids as little-endian uint32 bytes.
        a.add("flat", lambda text: np.frombuffer(ft.encode_batch_flat([text])[0], np.uint32),
              "encode_batch_flat([text]) -> uint32 bytes (numpy view)")
    elif tool == "toktok":
        toktok = _import("toktok")
        try:
            tk = toktok._toktok.Tokenizer(encoding)
        except Exception as e:  # its built-in encodings only
            raise Unsupported(f"toktok-rs has no {encoding}: {e}") from None
        a.version = version("toktok-rs")
        a.add("list", tk.encode_ordinary, "encode_ordinary(text) -> list")
        a.add("numpy", tk.encode_to_numpy, "encode_to_numpy(text) -> uint32 array")
    elif tool == "tiktoken":
        tiktoken = _import("tiktoken")
        enc = tiktoken.get_encoding(encoding)
        a.version = tiktoken.__version__ if hasattr(tiktoken, "__version__") else version("tiktoken")
        a.add("list", enc.encode_ordinary, "encode_ordinary(text) -> list")
        if hasattr(enc, "encode_to_numpy") and importlib.util.find_spec("numpy"):
            # disallowed_special=(): encode_ordinary's semantics, no special scan.
            a.add("numpy", lambda text: enc.encode_to_numpy(text, disallowed_special=()),
                  "encode_to_numpy(text, disallowed_special=()) -> uint32 array")
        a.batch = lambda docs, t: enc.encode_ordinary_batch(docs, num_threads=t)
        a.short_encode = enc.encode
        a.short_ordinary = enc.encode_ordinary
        a.decode = enc.decode
    elif tool == "riptoken":
        riptoken = _import("riptoken")
        enc = riptoken.get_encoding(encoding)
        a.version = version("riptoken")
        a.add("list", enc.encode_ordinary, "encode_ordinary(text) -> list")
        # riptoken's batch runs on rayon's global pool: run.py sets
        # RAYON_NUM_THREADS for this process, the thread count is not an argument.
        a.batch = lambda docs, t: enc.encode_ordinary_batch(docs)
        a.short_encode = enc.encode
        a.short_ordinary = enc.encode_ordinary
        a.decode = enc.decode
    elif tool == "tokendagger":
        tokendagger = _import("tokendagger")
        tiktoken = _import("tiktoken")
        te = tiktoken.get_encoding(encoding)  # only for the ranks, pattern and specials
        enc = tokendagger.Encoding(
            encoding,
            pat_str=te._pat_str,
            mergeable_ranks=te._mergeable_ranks,
            special_tokens=te._special_tokens,
        )
        a.version = version("tokendagger")
        a.add("list", enc.encode_ordinary, "encode_ordinary(text) -> list")
        a.batch = lambda docs, t: enc.encode_batch(docs, num_threads=t)
        a.short_encode = enc.encode
        a.short_ordinary = enc.encode_ordinary
        a.decode = enc.decode
    elif tool == "bpe-openai":
        bpe_openai = _import("bpe_openai")
        try:
            enc = bpe_openai.get_encoding(encoding)
        except Exception as e:  # its own errors for an encoding it lacks
            raise Unsupported(f"bpe-openai has no {encoding}: {e}") from None
        a.version = version("bpe-openai")
        # It refuses texts of 1M characters or more, and any call that gives
        # more than 200,000 tokens: feed ~40k-character pieces (at most 4
        # tokens a character), cut where the split patterns never join, so
        # the ids are those of the whole text.
        a.prepare = lambda text: cut_at_newlines(text, 40_000)

        def one(pieces):
            out = []
            for p in pieces:
                out.extend(enc.encode_ordinary(p))
            return out

        a.add("list", one, "encode_ordinary on ~40k-char pieces (it refuses >200k tokens a call)")
        a.batch = lambda docs, t: enc.encode_ordinary_batch(docs, num_threads=t)
        a.short_encode = enc.encode
        a.short_ordinary = enc.encode_ordinary
        a.decode = enc.decode
    elif tool in ("hf", "hf1"):
        tokenizers = _import("tokenizers")
        h = _hf_tokenizer(tokenizers, encoding)
        a.version = tokenizers.__version__
        if tool == "hf1":
            # 1.0's encodings hold their ids as a numpy view as well (ids_array).
            a.add("numpy", lambda text: h.encode(text, add_special_tokens=False).ids_array,
                  "encode(text).ids_array on our tokenizer.json")
        else:
            a.add("list", lambda text: h.encode(text, add_special_tokens=False).ids,
                  "encode(text).ids on our tokenizer.json")
        # HF's batch runs on rayon's global pool (RAYON_NUM_THREADS set by run.py).
        a.batch = lambda docs, t: [e.ids for e in h.encode_batch(docs, add_special_tokens=False)]
        a.short_ordinary = lambda s: h.encode(s, add_special_tokens=False).ids
        a.decode = lambda ids: h.decode(ids, skip_special_tokens=False)
    else:
        raise ValueError(f"unknown encoding tool {tool!r}")
    assert set(a.calls) <= set(CALLS[tool]), (tool, a.calls)
    return a


def _hf_tokenizer(tokenizers, encoding: str):
    """HF's Tokenizer for our exported tokenizer.json of ``encoding`` (untimed).
    HF tokenizers 1.0's reader takes only the split patterns its own engine
    knows, which lack tiktoken's end-of-text rule ``\\s+\\z`` (trailing
    whitespace at the very end of a text as one piece); refused, the pattern
    is written again without that alternative. Every timed text ends with a
    newline, where the two agree, and the ids are checked as for every tool."""
    from bpe import Tokenizer

    path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    try:
        Tokenizer.from_tiktoken(encoding).save_huggingface(path)
    except Exception as e:
        raise Unsupported(f"no tokenizer.json export for {encoding}: {e}") from None
    try:
        h = tokenizers.Tokenizer.from_file(path)
        h.encode("a b", add_special_tokens=False)  # 1.0 builds its pre-tokenizer on first use
        return h
    except Exception as e:
        if "backend" not in str(e):
            raise
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    for step in config["pre_tokenizer"].get("pretokenizers", [config["pre_tokenizer"]]):
        if step.get("type") == "Split":
            step["pattern"]["Regex"] = step["pattern"]["Regex"].replace("|\\s+\\z", "")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return tokenizers.Tokenizer.from_file(path)


def _awkward_flat(arr):
    import awkward as ak

    return ak.to_numpy(ak.flatten(arr, axis=None))


def pin(cpus: list[int] | None) -> list[int]:
    """Pins this process to ``cpus`` (threads started later inherit it; so
    do thread pools sized from the CPUs a process may use), and returns the
    CPUs it now runs on. Called before a tool is imported."""
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def threads_now() -> int | None:
    """Threads of this process right now (its own and any pool's)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def built(job: dict) -> tuple[Adapter, float]:
    """The tool's adapter for the job's encoding, and the seconds it took to
    build (loading the vocabulary; reported, never part of a timing)."""
    t0 = time.perf_counter()
    a = make_adapter(job["tool"], job["encoding"])
    return a, time.perf_counter() - t0


def throughput(nbytes: int, wall: float, cpu: float) -> dict:
    return {"wall_s": wall, "cpu_s": cpu, "cores": cpu / wall if wall > 0 else None,
            "mb_s": nbytes / 1e6 / wall if wall > 0 else None, "bytes": nbytes}


def single(job: dict) -> dict:
    """One single-text call timed once, pinned to one CPU. Warm: the call
    first encodes the warm-up slice (other text of the same corpus, so no
    cache that persists across calls has seen the timed text); cold
    (``warmup`` null): the timed call is the first call of the process."""
    cpus = pin(job.get("cpus"))
    a, build_s = built(job)
    rss_loaded = current_rss_mb()
    # numpy is imported before timing: the numpy calls of every tool import it
    # on their first call (~0.15 s here), which is no tokenizer's work.
    if importlib.util.find_spec("numpy"):
        import numpy  # noqa: F401
    fn = a.calls.get(job["call"])
    if fn is None:
        raise Unsupported(f"{job['call']} call not available in this build")
    text = read_text(job["text"])
    prepared = a.prepare(text)
    warm_bytes = 0
    if job.get("warmup"):
        warm = read_text(job["warmup"])
        warm_bytes = len(warm.encode("utf-8"))
        fn(a.prepare(warm))
        del warm
    if job.get("check_only"):
        # The ids check that comes before any timing: this process encodes the
        # timed text once and is then thrown away (its cache has seen the text).
        ids = fn(prepared)
        return {"n_ids": len(ids), "digest": ids_digest(ids), "version": a.version, "build_s": build_s}
    ids, wall, cpu = timed(fn, prepared)
    digest, n_ids, dtype = ids_digest(ids), len(ids), str(getattr(ids, "dtype", "list"))
    del ids
    out = throughput(len(text.encode("utf-8")), wall, cpu)
    # Memory: the resident set after loading the encoder, what stays resident
    # once the call's ids are freed (the encoder's tables and caches, with the
    # text), and the peak. RSS, not a heap count: the tools allocate through
    # different allocators (ours: mimalloc), which no one counter sees.
    out.update(n_ids=n_ids, digest=digest, dtype=dtype,
               warmup_bytes=warm_bytes, cpus=cpus, threads=threads_now(), build_s=build_s,
               how=a.how[job["call"]], version=a.version, peak_rss_mb=peak_rss_mb(),
               rss_loaded_mb=rss_loaded, rss_after_mb=current_rss_mb())
    if a.module:
        out["module"] = a.module
    return out


def files(job: dict) -> dict:
    """One encode_files (or encode_batch) call on a large file with
    ``threads`` threads, pinned to ``cpus``, after a warm-up on another file.
    Both files are read once first, untimed, so every tool finds them in the
    page cache."""
    cpus = pin(job.get("cpus"))
    a, build_s = built(job)
    t, path, warm = job["threads"], job["file"], job["warmup"]
    for p in (path, warm):
        Path(p).read_bytes()
    if job["mode"] == "files":
        if a.files is None:
            raise Unsupported("encode_files not available in this build")
        call, to_ids = a.files
        run, arg, warm_arg = (lambda p: call(p, t)), path, warm
        how = "encode_files([path], num_threads=N)" if job["tool"] == "bpe" else "encode_files(path)"
    else:
        if a.batch is None:
            raise Unsupported("no batch call")
        to_ids = _flat_list
        run = lambda docs: a.batch(docs, t)  # noqa: E731
        arg, warm_arg = batch_docs(read_text(path), job["docs"]), batch_docs(read_text(warm), job["docs"])
        how = f"encode_batch(~{job['docs']:,} documents, num_threads=N)"
    if job.get("warmup_mode", "warm") == "warm":
        run(warm_arg)
    out_, wall, cpu = timed(run, arg)
    ids = to_ids(out_)
    out = throughput(os.path.getsize(path), wall, cpu)
    out.update(n_ids=len(ids), digest=ids_digest(ids), threads=t, threads_seen=threads_now(), cpus=cpus,
               build_s=build_s, how=how, version=a.version, peak_rss_mb=peak_rss_mb(),
               warmup_mode=job.get("warmup_mode", "warm"), rayon_num_threads=os.environ.get("RAYON_NUM_THREADS"))
    return out


def _flat_list(docs_ids):
    return [i for d in docs_ids for i in d]


def digest(job: dict) -> dict:
    """tiktoken's ids of a whole file (encode_ordinary), as a fingerprint:
    the reference every tool's ids are checked against."""
    tiktoken = _import("tiktoken")
    enc = tiktoken.get_encoding(job["encoding"])
    text = read_text(job["file"])
    ids, wall, _ = timed(enc.encode_ordinary, text)
    return {"digest": ids_digest(ids), "n_ids": len(ids), "wall_s": wall, "version": version("tiktoken")}


def _median_run(fn, arg, repeats: int, before=None) -> dict:
    walls, cpus = [], []
    for _ in range(repeats):
        if before is not None:
            before()
        _, w, c = timed(fn, arg)
        walls.append(w)
        cpus.append(c)
    wall = statistics.median(walls)
    cpu = statistics.median(cpus)
    return {"wall_s": wall, "cpu_s": cpu, "cores": cpu / wall if wall > 0 else None, "walls": walls}


def alternations(one, batch, before_one, before_batch, n: int = 5) -> dict:
    """Our batch-over-one-thread speed-up, timed in alternation: ``n`` pairs
    of (one whole-text call, one batch call), each pair's ratio of times,
    each call after its ``before`` (untimed: see ``extras``).
    On this 2-core machine a minute's slowdown hits two threads harder than
    one, and a single timing of each, seconds apart, swung the ratio from
    1.38 to 1.76 between rounds of the same build; a pair timed back to back
    sees the same minute. Each call's result is kept until the next one
    returns, as a caller's loop would keep it (see ``_median_run``)."""
    ratios = []
    kept = None
    for _ in range(n):
        before_one()
        kept, w_one, _ = timed(one)
        before_batch()
        kept, w_batch, _ = timed(batch)
        ratios.append(w_one / w_batch)
    del kept
    return {"ratios": ratios}


def _guard(fn):
    """Runs one measurement; an error becomes a result, not a crash, so the
    other measurements of this tool still come back."""
    try:
        return fn()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def extras(job: dict) -> dict:
    """Everything but single-text throughput, for one tool, one vocabulary and
    one corpus, in one unpinned child: batch encoding with ``threads``
    threads (and for us one thread, and our batch / one-thread ratio timed
    in alternation), decode, and short strings."""
    tool, repeats = job["tool"], job["repeats"]
    threads = job.get("threads", 2)
    a, _ = built(job)
    out: dict = {"version": a.version, "corpora": {}}
    if a.module:
        out["module"] = a.module
    name, path = job["corpus"]
    text = read_text(path)
    nbytes = len(text.encode("utf-8"))
    prepared = a.prepare(text)
    entry: dict = {}
    ids = _guard(lambda: a.primary()(prepared))  # untimed: what decode gets back

    if a.decode is not None and isinstance(ids, dict):  # the call failed
        entry["decode"] = ids
    elif a.decode is not None:
        def decode_run():
            back = a.decode(ids)
            r = _median_run(a.decode, ids, repeats)
            r.update(mb_s=nbytes / 1e6 / r["wall_s"], roundtrip=back == text)
            return r

        entry["decode"] = _guard(decode_run)

    if a.batch is not None:
        docs = batch_docs(text, 1000)
        # Before each timed batch or whole-text call of a tool whose encoder
        # keeps a cache across calls (ours): the cache emptied and warmed on
        # the warm-up slice (other text of the same corpus), as the
        # one-thread rows are, so it never holds the timed text's words.
        # Timed again and again on the same text, a cache that keeps them
        # would time look-ups, not encoding (and favour the one-thread call,
        # whose single memo holds all of them).
        warm = read_text(job["warmup"]) if job.get("warmup") and a.clear_cache is not None else None
        warm_docs = batch_docs(warm, 1000) if warm is not None else None
        warm_bytes = len(warm.encode("utf-8")) if warm is not None else 0

        def fresh(call, arg):
            def before():
                if warm is not None:
                    a.clear_cache()
                    call(arg)
            return before

        def batch_run(t):
            def run():
                flat = _flat_list(a.batch(docs, t))
                r = _median_run(lambda d: a.batch(d, t), docs, repeats, fresh(lambda d: a.batch(d, t), warm_docs))
                r.update(mb_s=nbytes / 1e6 / r["wall_s"], digest=ids_digest(flat), docs=len(docs), threads=t,
                         warmup_bytes=warm_bytes)
                return r

            return _guard(run)

        entry["batch"] = batch_run(threads)
        if tool == "bpe" and threads != 1:
            entry["batch1"] = batch_run(1)
            warm_prepared = a.prepare(warm) if warm is not None else None
            entry["scaling"] = _guard(lambda: alternations(lambda: a.primary()(prepared),
                                                           lambda: a.batch(docs, threads),
                                                           fresh(a.primary(), warm_prepared),
                                                           fresh(lambda d: a.batch(d, threads), warm_docs)))
            if warm is not None and "ratios" in entry["scaling"]:
                entry["scaling"]["warmup_bytes"] = warm_bytes
    out["corpora"][name] = entry

    strings = short_strings(text)
    out["short"] = {"n": len(strings)}
    for key, fn in (("encode", a.short_encode), ("encode_ordinary", a.short_ordinary)):
        if fn is None:
            continue

        def short_run(fn=fn):
            ids = [i for s in strings for i in fn(s)]  # warm-up and check

            def loop(strs):
                for s in strs:
                    fn(s)

            r = _median_run(loop, strings, repeats)
            r.update(ns_per_call=r["wall_s"] / len(strings) * 1e9, digest=ids_digest(ids))
            return r

        out["short"][key] = _guard(short_run)

    out["peak_rss_mb"] = peak_rss_mb()
    return out


def alongside(job: dict) -> dict:
    """The one-thread call of the batch ratio (``primary``, as in
    ``alternations``), timed ``calls`` times on one pinned CPU, each after the
    cache is emptied and warmed on ``warmup``. Run alone, and as one of
    several copies at once, each on its own CPU, it tells what the machine's
    CPUs give together when each runs the same work as one: the most a batch
    on those CPUs could gain over one thread.

    The copies keep in step through the folder ``sync``: each, once loaded,
    times one warm-up and call and writes it to ``ready.<cpu>``; the driver
    then writes ``go`` (a wall-clock start and a gap longer than any copy's
    warm-up and call), and the i-th timed call of every copy starts at
    ``start + i * gap``."""
    cpus = pin(job.get("cpus"))
    a, _ = built(job)
    if importlib.util.find_spec("numpy"):
        import numpy  # noqa: F401
    fn = a.primary()
    text = a.prepare(read_text(job["text"]))
    warm = a.prepare(read_text(job["warmup"])) if job.get("warmup") else None

    def before():
        if warm is not None and a.clear_cache is not None:
            a.clear_cache()
            fn(warm)

    t0 = time.perf_counter()
    before()
    fn(text)
    sync = job["sync"]
    me = os.path.join(sync, f"ready.{cpus[0] if cpus else os.getpid()}")
    with open(me + ".tmp", "w") as f:
        f.write(str(time.perf_counter() - t0))
    os.replace(me + ".tmp", me)
    go = os.path.join(sync, "go")
    deadline = time.time() + job.get("wait_s", 300)
    while not os.path.exists(go):
        if time.time() > deadline:
            raise RuntimeError("the other copies never got ready")
        time.sleep(0.01)
    with open(go) as f:
        start, gap = map(float, f.read().split())
    walls, kept, late = [], None, 0.0
    for i in range(job["calls"]):
        before()
        at = start + i * gap
        late = max(late, time.time() - at)
        while time.time() < at:
            pass  # a busy wait: a sleeping CPU may wake slower than a busy one
        kept, w, _ = timed(fn, text)
        walls.append(w)
    del kept
    return {"walls": walls, "cpus": cpus, "late_s": late}


# --------------------------------------------------------------------------


def main() -> None:
    job = json.loads(sys.argv[1])
    try:
        kinds = {"train": train, "single": single, "extras": extras, "files": files, "digest": digest,
                 "alongside": alongside}
        if job["kind"] not in kinds:
            raise ValueError(f"unknown job kind {job['kind']!r}")
        result = kinds[job["kind"]](job)
        result["status"] = "ok"
    except NotInstalled as e:
        result = {"status": "not installed", "error": str(e)}
    except Unsupported as e:
        result = {"status": "unsupported", "error": str(e)}
    except Exception as e:
        traceback.print_exc()
        result = {"status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
