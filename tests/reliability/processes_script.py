"""The scenarios of tests/reliability/test_processes.py, each run as a script in a fresh
interpreter (``python processes_script.py SCENARIO DIR``), so that a hang
fails the test at its timeout instead of hanging the suite, and every fork
starts from a process that has done exactly what the scenario did.

A scenario prints one JSON line as its last line: what the test checks.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

import bpe
from bpe import Counts, Tokenizer

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "corpora" / "tinyshakespeare.txt").read_text()
CHILD_SECONDS = 60  # a child that takes longer has hung (each call takes well under a second)


def make_files(folder: Path) -> dict[str, Path]:
    """A text file, a JSON Lines file and a second text, for the file paths."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"text": folder / "a.txt", "more": folder / "b.txt", "jsonl": folder / "c.jsonl"}
    files["text"].write_text(TEXT[:300_000])
    files["more"].write_text(TEXT[300_000:400_000])
    files["jsonl"].write_text("".join(json.dumps({"text": TEXT[i:i + 500]}) + "\n" for i in range(0, 50_000, 500)))
    return files


def plain(value):
    """A value that pickles and compares by content (arrays as lists)."""
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.tolist())
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, Tokenizer):
        return ("tokenizer", value._dumps())
    if isinstance(value, Counts):  # its table, written and read back
        path = Path(f"/tmp/bpe-counts-{os.getpid()}.bpec")
        value.save(path, force=True)
        try:
            return ("counts", path.read_bytes())
        finally:
            path.unlink()
    return value


def calls(tok: Tokenizer, files: dict[str, Path], out: Path) -> dict:
    """Every kind of call into the core, by name; each returns a value to compare."""
    from bpe.cli import main

    docs = [TEXT[i:i + 2000] for i in range(0, 200_000, 2000)]
    big = TEXT[:400_000]

    def cli(*argv) -> bytes:
        target = out / f"cli-{os.getpid()}-{argv[0]}"
        code = main([*argv, "-o", str(target), "-q", "--force"])
        if target.is_file():
            return code, target.read_bytes()
        return code, {p.name: p.read_bytes() for p in sorted(target.iterdir())}

    def counts_merged():
        a = bpe.count(TEXT[:100_000])
        b = bpe.count(TEXT[100_000:200_000])
        return Counts.merge(a, b)

    return {
        "encode": lambda: tok.encode(big),
        "encode_ordinary": lambda: tok.encode_ordinary(big),
        "encode_to_numpy": lambda: tok.encode_to_numpy(big),
        "encode num_threads=2": lambda: tok.encode(big, num_threads=2),
        "encode num_threads=None": lambda: tok.encode(big, num_threads=None),
        "encode_to_numpy num_threads=2": lambda: tok.encode_to_numpy(big, num_threads=2),
        "encode_batch": lambda: tok.encode_batch(docs),
        "encode_batch num_threads=1": lambda: tok.encode_batch(docs, num_threads=1),
        "encode_batch num_threads=2": lambda: tok.encode_batch(docs, num_threads=2),
        "encode_batch_to_numpy": lambda: tok.encode_batch_to_numpy(docs),
        "encode_files": lambda: tok.encode_files([files["text"], files["more"]], num_threads=2),
        "encode_files num_threads=1": lambda: tok.encode_files([files["text"]], num_threads=1),
        "encode_with_offsets": lambda: tok.encode_with_offsets(TEXT[:5000]),
        "count": lambda: tok.count(big),
        "dropout": lambda: tok.encode(TEXT[:20_000], dropout=0.1, seed=7),
        "decode": lambda: tok.decode(tok.encode(big)),
        "decode_bytes": lambda: tok.decode_bytes(tok.encode(TEXT[:50_000])),
        "stream decoder": lambda: (lambda d: "".join(d.feed(i) for i in tok.encode(TEXT[:5000])) + d.flush())(tok.decoder()),
        "train text": lambda: Tokenizer.train(TEXT[:200_000], 400, progress=False),
        "train file": lambda: Tokenizer.train(files["text"], 400, progress=False),
        "train jsonl": lambda: Tokenizer.train(files["jsonl"], 300, progress=False),
        "train max_memory": lambda: Tokenizer.train([files["text"], files["more"]], 400, progress=False,
                                                    max_memory="1M"),
        "train sizes": lambda: Tokenizer.train(TEXT[:100_000], [300, 350], progress=False),
        "train extend": lambda: Tokenizer.train(TEXT[:100_000], tok.n_vocab + 40, base=tok, progress=False),
        "count (bpe.count)": lambda: bpe.count([files["text"], TEXT[:50_000]]),
        "Counts.merge": counts_merged,
        "train_from_counts": lambda: Tokenizer.train_from_counts(bpe.count(TEXT[:100_000]), 350),
        "shrink": lambda: tok.shrink(300),
        "cli train": lambda: cli("train", str(files["text"]), "--vocab", "300"),
        "cli encode": lambda: cli("encode", "-t", str(out / "tok.bpe"), str(files["text"]), "--format", "dataset"),
        "cli count": lambda: cli("count", str(files["text"])),
    }


def run_in_child(call, seconds: int = CHILD_SECONDS):
    """Runs ``call`` in a forked child; returns ("ok", value), ("error", repr)
    or ("hang", seconds)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(seconds)  # a hang ends here, killed by the alarm
        try:
            outcome = pickle.dumps(("ok", plain(call())))
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            outcome = pickle.dumps(("error", repr(e)))
        with os.fdopen(write, "wb") as f:
            f.write(outcome)
        os._exit(0)
    os.close(write)
    data = b""
    with os.fdopen(read, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("hang" if os.WTERMSIG(status) == signal.SIGALRM else "killed", os.WTERMSIG(status))
    return pickle.loads(data)


def tokenizer(out: Path) -> Tokenizer:
    tok = Tokenizer.train(TEXT[:300_000], 1000, progress=False)
    tok.save(out / "tok.bpe", force=True)
    return tok


def every_call(out: Path) -> dict:
    """The parent makes every call once (its pools, memos and caches exist),
    then each call runs in a forked child: same result, no hang."""
    files = make_files(out / "files")
    tok = tokenizer(out)
    table = calls(tok, files, out)
    expected = {name: plain(call()) for name, call in table.items()}
    report = {}
    for name, call in table.items():
        status, value = run_in_child(call)
        if status == "ok" and value != expected[name]:
            status, value = "differs", None
        report[name] = status if status == "ok" else f"{status}: {value}"
    return report


def fork_while_busy(out: Path) -> dict:
    """Forks while other threads of the parent are inside the core: an
    encode_batch with the GIL released (memos growing, the pool's threads
    busy, the allocator in use) and a training. Every child must work."""
    files = make_files(out / "files")
    tok = tokenizer(out)
    docs = [TEXT[i:i + 3000] + str(i) for i in range(0, 900_000, 3000)]  # ~300 docs, new words each
    stop = threading.Event()

    def encode_loop():
        k = 0
        while not stop.is_set():
            tok.encode_batch([d + str(k) for d in docs])
            tok.encode(TEXT[: 200_000 + k], num_threads=2)
            k += 1

    def train_loop():
        while not stop.is_set():
            Tokenizer.train([files["text"], files["more"]], 400, progress=False, max_memory="1M")

    def cache_loop():
        while not stop.is_set():
            tok.set_cache_size("1M")
            tok.clear_cache()
            tok.set_cache_size("64M")
            time.sleep(0.001)

    threads = [threading.Thread(target=f, daemon=True) for f in (encode_loop, encode_loop, train_loop, cache_loop)]
    for t in threads:
        t.start()
    expected = (plain(tok.encode_batch(docs[:40])), plain(Tokenizer.train(TEXT[:50_000], 300, progress=False)))

    def in_child():
        return (plain(tok.encode_batch(docs[:40])), plain(Tokenizer.train(TEXT[:50_000], 300, progress=False)),
                tok.cache_info()["capacity"] > 0, len(tok.encode_files([files["text"]])[0]) > 0)

    outcomes = []
    for k in range(24):
        time.sleep(0.05 + 0.01 * k)
        status, value = run_in_child(in_child)
        if status == "ok":
            status = "ok" if value[:2] == expected and all(value[2:]) else "differs"
        outcomes.append(status if status == "ok" else f"{status}: {value}")
    stop.set()
    for t in threads:
        t.join(timeout=120)
    return {"forks": len(outcomes), "bad": [o for o in outcomes if o != "ok"]}


def threads_at_once(out: Path) -> dict:
    """One tokenizer, 8 threads calling the encoders and the decoder at once
    while another changes and clears the cache: ids as on one thread."""
    files = make_files(out / "files")
    tok = tokenizer(out)
    texts = [TEXT[i * 20_000:(i + 1) * 20_000] for i in range(8)]
    docs = [TEXT[i:i + 1000] for i in range(0, 100_000, 1000)]
    want = {
        "encode": [tok.encode(t) for t in texts],
        "batch": tok.encode_batch(docs),
        "numpy": [tok.encode_to_numpy(t).tolist() for t in texts],
        "files": tok.encode_files([files["text"], files["more"]])[0].tolist(),
    }
    bad, done = [], []
    stop = threading.Event()

    def worker(k: int):
        for round_ in range(6):
            got = {
                "encode": [tok.encode(t) for t in texts[k:] + texts[:k]],
                "batch": tok.encode_batch(docs, num_threads=2),
                "numpy": [tok.encode_to_numpy(t).tolist() for t in texts[k:] + texts[:k]],
                "files": tok.encode_files([files["text"], files["more"]], num_threads=2)[0].tolist(),
            }
            got["encode"] = got["encode"][-k:] + got["encode"][:-k] if k else got["encode"]
            got["numpy"] = got["numpy"][-k:] + got["numpy"][:-k] if k else got["numpy"]
            for name in want:
                if got[name] != want[name]:
                    bad.append(f"thread {k} round {round_}: {name} differs")
            if tok.decode(want["encode"][k]) != texts[k]:
                bad.append(f"thread {k}: decode differs")
        done.append(k)

    def cacher():
        while not stop.is_set():
            tok.set_cache_size("512K")
            tok.clear_cache()
            tok.set_cache_size("64M")
            tok.cache_info()

    workers = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(8)]
    side = threading.Thread(target=cacher, daemon=True)
    side.start()
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=300)
    stop.set()
    side.join(timeout=60)
    return {"finished": len(done), "bad": bad}


def _encode_chunk(args):
    """A pool task: encodes texts with the tokenizer saved at ``path``, or the
    parent's (forked children inherit it)."""
    path, texts = args
    tok = _TOK if path is None else Tokenizer.load(path)
    return tok.encode_batch(texts)


_TOK: Tokenizer | None = None


def pools(out: Path) -> dict:
    """multiprocessing.Pool with each start method, and ProcessPoolExecutor,
    after the parent encoded: the workers' ids equal the parent's."""
    import concurrent.futures
    import multiprocessing as mp

    global _TOK
    _TOK = tokenizer(out)
    chunks = [[TEXT[i + j:i + j + 800] for j in range(0, 8000, 800)] for i in range(0, 80_000, 8000)]
    want = [_TOK.encode_batch(c) for c in chunks]
    report = {}
    for method in ("fork", "forkserver", "spawn"):
        ctx = mp.get_context(method)
        path = None if method == "fork" else str(out / "tok.bpe")
        with ctx.Pool(2) as pool:
            got = pool.map(_encode_chunk, [(path, c) for c in chunks])
        report[f"Pool {method}"] = "ok" if got == want else "differs"
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
        got = list(ex.map(_encode_chunk, [(None, c) for c in chunks]))
    report["ProcessPoolExecutor fork"] = "ok" if got == want else "differs"
    with concurrent.futures.ProcessPoolExecutor(2) as ex:  # the platform's default method
        got = list(ex.map(_encode_chunk, [(str(out / "tok.bpe"), c) for c in chunks]))
    report["ProcessPoolExecutor default"] = "ok" if got == want else "differs"
    return report


class _Docs:
    """A map-style dataset that encodes in ``__getitem__``."""

    def __init__(self, tok: Tokenizer, texts: list[str]):
        self.tok, self.texts = tok, texts

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        import torch

        batch = self.tok.encode_batch([self.texts[i], self.texts[-1 - i]])
        return torch.tensor(batch[0] + batch[1])


def dataloader(out: Path) -> dict:
    """torch's DataLoader, two workers, the default (fork) context, after
    the parent encoded with its threads."""
    import torch.utils.data

    tok = tokenizer(out)
    texts = [TEXT[i:i + 1500] for i in range(0, 60_000, 1500)]
    tok.encode_batch(texts)  # the parent's pool and memos exist before the fork
    want = [b[0] + b[1] for b in (tok.encode_batch([texts[i], texts[-1 - i]]) for i in range(len(texts)))]
    loader = torch.utils.data.DataLoader(_Docs(tok, texts), batch_size=None, num_workers=2)
    got = [t.tolist() for t in loader]
    return {"start method": torch.multiprocessing.get_start_method(), "same": got == want, "n": len(got)}


def datasets_map(out: Path) -> dict:
    """HF datasets' Dataset.map with two processes, after the parent encoded."""
    import datasets

    tok = tokenizer(out)
    texts = [TEXT[i:i + 1000] for i in range(0, 40_000, 1000)]
    tok.encode_batch(texts)
    ds = datasets.Dataset.from_dict({"text": texts})
    mapped = ds.map(lambda b: {"ids": tok.encode_batch(b["text"])}, batched=True, batch_size=5, num_proc=2)
    return {"same": mapped["ids"] == tok.encode_batch(texts)}


def _long_task(_):
    """Encodes until stopped (a pool worker under Ctrl-C)."""
    big = TEXT * 4
    while True:
        _TOK.encode_batch([big[i:i + 50_000] for i in range(0, len(big), 50_000)])


def ctrl_c_pool(out: Path) -> dict:
    """A pool of forked workers busy in the core; the test sends SIGINT to
    the whole process group (as a terminal's Ctrl-C does) once this prints
    "ready", and times how long the group takes to go."""
    import multiprocessing as mp

    global _TOK
    _TOK = tokenizer(out)
    _TOK.encode_batch([TEXT[:10_000]] * 4)
    with mp.get_context("fork").Pool(2) as pool:
        result = pool.map_async(_long_task, range(2))
        time.sleep(1.0)  # the workers are inside encode_batch
        print("ready", flush=True)
        result.get(timeout=120)
    return {"stopped": False}


SCENARIOS = {f.__name__: f for f in (every_call, fork_while_busy, threads_at_once, pools, dataloader,
                                     datasets_map, ctrl_c_pool)}

if __name__ == "__main__":
    name, folder = sys.argv[1], Path(sys.argv[2])
    result = SCENARIOS[name](folder)
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    # Daemon threads may still be inside the core: leave without waiting.
    os._exit(0)
