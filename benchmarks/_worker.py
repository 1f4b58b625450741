"""One benchmark job, run by run.py in a fresh child process.

    python benchmarks/_worker.py '<json job>'

A fresh process per job means one tool's memory, thread pools and caches never
colour another's numbers, and peak RSS (ru_maxrss) belongs to that job alone.
The result is one JSON line on stdout, prefixed with RESULT_PREFIX (anchors
may print their own chatter around it).

Jobs:
  {"kind": "train", "tool": ..., "file": ..., "vocab": V, "feed": ..., ...}
      one training run; timed is the training call only (see each tool).
  {"kind": "encode", "tool": ..., "encoding": "cl100k_base", "corpora": [[name, path], ...], ...}
      everything the encoding section measures for one tool and one
      vocabulary: warm-up once, then `repeats` timed runs inside this process
      (run.py asks for one, and runs the tools round robin).
"""

from __future__ import annotations

import array
import hashlib
import importlib.util
import json
import os
import resource
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
# encoding


class Adapter:
    """How one tool is driven. ``prepare`` (untimed) turns the corpus into
    what ``one`` (timed) takes; ``how`` says so in the output."""

    how = "whole text, one call"
    version = None
    numpy = None  # text -> array, optional
    batch = None  # (docs, threads) -> list of lists
    short_encode = None  # str -> ids, default special-token policy
    short_ordinary = None  # str -> ids
    decode = None  # ids -> str

    def prepare(self, text):
        return text

    def one(self, prepared):
        raise NotImplementedError


def make_adapter(tool: str, encoding: str, job: dict) -> Adapter:
    a = Adapter()
    if tool == "bpe":
        from bpe import Tokenizer

        tok = Tokenizer.from_tiktoken(encoding)
        a.version = version("bpe")
        a.module = _module_file("bpe")
        a.one = tok.encode_ordinary
        # encode_to_numpy is new; measured when this build has it.
        a.numpy = getattr(tok, "encode_to_numpy", None)
        # disallowed_special=() gives encode_ordinary's semantics, as
        # tiktoken's encode_ordinary_batch has (the default would also scan
        # every text for special-token text).
        a.batch = lambda docs, t: tok.encode_batch(docs, num_threads=t, disallowed_special=())
        a.short_encode = tok.encode
        a.short_ordinary = tok.encode_ordinary
        a.decode = tok.decode
    elif tool == "tiktoken":
        tiktoken = _import("tiktoken")
        enc = tiktoken.get_encoding(encoding)
        a.version = tiktoken.__version__ if hasattr(tiktoken, "__version__") else version("tiktoken")
        a.one = enc.encode_ordinary
        if hasattr(enc, "encode_to_numpy") and importlib.util.find_spec("numpy"):
            # disallowed_special=(): encode_ordinary's semantics, no special scan.
            a.numpy = lambda text: enc.encode_to_numpy(text, disallowed_special=())
        a.batch = lambda docs, t: enc.encode_ordinary_batch(docs, num_threads=t)
        a.short_encode = enc.encode
        a.short_ordinary = enc.encode_ordinary
        a.decode = enc.decode
    elif tool == "riptoken":
        riptoken = _import("riptoken")
        enc = riptoken.get_encoding(encoding)
        a.version = version("riptoken")
        a.one = enc.encode_ordinary
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
        a.one = enc.encode_ordinary
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
        a.how = "~40k-char pieces (it refuses >200k tokens a call)"
        a.prepare = lambda text: cut_at_newlines(text, 40_000)

        def one(pieces):
            out = []
            for p in pieces:
                out.extend(enc.encode_ordinary(p))
            return out

        a.one = one
        a.batch = lambda docs, t: enc.encode_ordinary_batch(docs, num_threads=t)
        a.short_encode = enc.encode
        a.short_ordinary = enc.encode_ordinary
        a.decode = enc.decode
    elif tool == "hf":
        tokenizers = _import("tokenizers")
        from bpe import Tokenizer

        # Our exported tokenizer.json for the same vocabulary (untimed).
        path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
        try:
            Tokenizer.from_tiktoken(encoding).save_huggingface(path)
        except Exception as e:
            raise Unsupported(f"no tokenizer.json export for {encoding}: {e}") from None
        h = tokenizers.Tokenizer.from_file(path)
        a.version = tokenizers.__version__
        a.one = lambda text: h.encode(text, add_special_tokens=False).ids
        # HF's batch runs on rayon's global pool (RAYON_NUM_THREADS set by run.py).
        a.batch = lambda docs, t: [e.ids for e in h.encode_batch(docs, add_special_tokens=False)]
        a.short_ordinary = lambda s: h.encode(s, add_special_tokens=False).ids
        a.decode = lambda ids: h.decode(ids, skip_special_tokens=False)
    else:
        raise ValueError(f"unknown encoding tool {tool!r}")
    return a


class Unsupported(Exception):
    pass


def _median_run(fn, arg, repeats: int) -> dict:
    walls, cpus = [], []
    for _ in range(repeats):
        _, w, c = timed(fn, arg)
        walls.append(w)
        cpus.append(c)
    wall = statistics.median(walls)
    cpu = statistics.median(cpus)
    return {"wall_s": wall, "cpu_s": cpu, "cores": cpu / wall if wall > 0 else None, "walls": walls}


def alternations(one, batch, n: int = 5) -> dict:
    """Our batch-over-one-thread speed-up, timed in alternation: ``n`` pairs
    of (one whole-text call, one batch call), each pair's ratio of times.
    On this 2-core machine a minute's slowdown hits two threads harder than
    one, and a single timing of each, seconds apart, swung the ratio from
    1.38 to 1.76 between rounds of the same build; a pair timed back to back
    sees the same minute. Each call's result is kept until the next one
    returns, as a caller's loop would keep it (see ``_median_run``)."""
    ratios = []
    kept = None
    for _ in range(n):
        kept, w_one, _ = timed(one)
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


def encode(job: dict) -> dict:
    tool, encoding, repeats = job["tool"], job["encoding"], job["repeats"]
    threads = job.get("threads", 2)
    a = make_adapter(tool, encoding, job)
    out: dict = {"version": a.version, "how": a.how, "corpora": {}}
    if getattr(a, "module", None):
        out["module"] = a.module
    texts = {}

    for name, path in job["corpora"]:
        text = read_text(path)
        texts[name] = text
        nbytes = len(text.encode("utf-8"))

        def one_thread():
            prepared = a.prepare(text)
            ids = a.one(prepared)  # warm-up, and the ids to check
            r = _median_run(a.one, prepared, repeats)
            r.update(mb_s=nbytes / 1e6 / r["wall_s"], n_ids=len(ids), digest=ids_digest(ids), bytes=nbytes)
            return r, ids

        res = _guard(lambda: one_thread())
        if isinstance(res, tuple):
            res, ids = res
        else:
            ids = None
        entry = {"one": res}
        if a.numpy is not None:
            def numpy_run():
                arr = a.numpy(text)
                r = _median_run(a.numpy, text, repeats)
                r.update(mb_s=nbytes / 1e6 / r["wall_s"], digest=ids_digest(arr), dtype=str(arr.dtype))
                return r

            entry["numpy"] = _guard(numpy_run)

        if name == job.get("decode_corpus") and ids is not None and a.decode is not None:
            def decode_run():
                back = a.decode(ids)
                r = _median_run(a.decode, ids, repeats)
                r.update(mb_s=nbytes / 1e6 / r["wall_s"], roundtrip=back == text)
                return r

            entry["decode"] = _guard(decode_run)

        if name == job.get("batch_corpus") and a.batch is not None:
            docs = batch_docs(text, 1000)

            def batch_run(t):
                def run():
                    got = a.batch(docs, t)
                    flat = [i for d in got for i in d]
                    r = _median_run(lambda d: a.batch(d, t), docs, repeats)
                    r.update(mb_s=nbytes / 1e6 / r["wall_s"], digest=ids_digest(flat), docs=len(docs), threads=t)
                    return r

                return _guard(run)

            entry["batch"] = batch_run(threads)
            if tool == "bpe" and threads != 1:
                entry["batch1"] = batch_run(1)
                prepared = a.prepare(text)
                entry["scaling"] = _guard(lambda: alternations(lambda: a.one(prepared),
                                                               lambda: a.batch(docs, threads)))
        out["corpora"][name] = entry
        out["peak_rss_mb_so_far"] = peak_rss_mb()

    short_src = job.get("short_corpus")
    if short_src:
        strings = short_strings(texts[short_src])
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


# --------------------------------------------------------------------------


def main() -> None:
    job = json.loads(sys.argv[1])
    try:
        if job["kind"] == "train":
            result = train(job)
        elif job["kind"] == "encode":
            result = encode(job)
        else:
            raise ValueError(f"unknown job kind {job['kind']!r}")
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
