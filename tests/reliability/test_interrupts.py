"""Reliability (docs/reliability.md), 3. No crash, no loss: a panic in
the Rust core is a Python exception, a process killed with SIGKILL during a
save leaves the previous file, Ctrl-C returns control promptly and leaves no
file behind.

Covered elsewhere: a failing save (disk full, Ctrl-C inside the write) keeps
the old file: tests/util/test_files.py::test_failed_save_keeps_old_file; a failed
`bpe encode --out` keeps the old dataset:
tests/cli/test_cli_failures.py::test_failed_encode_keeps_existing_dataset.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

import bpe
from bpe import Tokenizer
from conftest import default_sigint
from helpers import SHAKESPEARE, python_child as python, with_checksum

TEXT = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
SPECIALS = ["<|endoftext|>", "<|fim|>"]
MiB = 1 << 20


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXT, 400, special_tokens=SPECIALS, progress=False)


@pytest.mark.parametrize("threads", [0, 2])
def test_rust_panic_becomes_a_python_exception(threads):
    """A panic in the core (here provoked on purpose, in the calling thread or
    in worker threads with the GIL released) is a RuntimeError, which
    `except Exception` catches, and the interpreter goes on working."""
    where = " in a worker thread" if threads else ""
    message = rf"internal error in the bpe Rust core: provoked panic{where} \(please report this\)"
    for _ in range(2):  # twice: the first panic left nothing behind that breaks the next call
        caught = None
        try:
            bpe._core._panic_for_tests(threads)
        except Exception as e:  # what a program's `except Exception` sees (pyo3's PanicException it would not)
            caught = e
        assert type(caught) is RuntimeError, repr(caught)
        assert re.fullmatch(message, str(caught)), str(caught)
    # The process goes on working, thread pools included.
    t = Tokenizer.train("hello hello", 258, special_tokens=())
    assert t.decode(t.encode("hello")) == "hello"
    assert t.encode_batch(["hello"] * 8, num_threads=2) == [t.encode("hello")] * 8


def test_out_of_range_ids_in_a_file_do_not_abort_the_process(tmp_path):
    """Found by this work: a special token id near 2**32 in a (checksummed)
    file made the core allocate 64 GB and abort the interpreter. Now it is a
    TokenizerFileError. (Run in a child: a regression must not kill pytest.)"""
    body = f'bpe-tokenizer v1\npattern {json.dumps(bpe.GPT2_PATTERN)}\nspecial_tokens 1\n"<x>" 4294967295\nmerges 0\n'
    path = tmp_path / "huge-id.bpe"
    path.write_bytes(with_checksum(body))
    child = python("import sys, bpe\ntry:\n bpe.Tokenizer.load(sys.argv[1])\nexcept bpe.TokenizerFileError as e:\n print(e)",
                   path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert "out of range" in out.decode() and "4294967295" in out.decode()


SAVE_LOOP = """
import sys, time
import bpe, bpe._util.files as F
a, b = bpe.Tokenizer.load(sys.argv[1]), bpe.Tokenizer.load(sys.argv[2])
real = F.atomic_write
def slow(path, fill, **options):  # write each file in two halves, with a pause between
    def halves(f):
        class Slow:
            def write(self, data):
                f.write(data[: len(data) // 2]); f.flush(); time.sleep(0.003); f.write(data[len(data) // 2 :])
        fill(Slow())
    real(path, halves, **options)
F.atomic_write = slow
print("ready", flush=True)
i = 0
while True:
    (a if i % 2 else b).save(sys.argv[3])
    i += 1
"""


def test_sigkill_during_save_leaves_the_previous_file(tmp_path, tok):
    """A process killed with SIGKILL while saving (over and over) leaves the
    target as one complete file, the old or the new, never a mix or a stub."""
    a_path, b_path, target = tmp_path / "a.bpe", tmp_path / "b.bpe", tmp_path / "target.bpe"
    tok.save(a_path)
    Tokenizer.train(TEXT, 500, progress=False).save(b_path)
    versions = {a_path.read_bytes(), b_path.read_bytes()}
    target.write_bytes(a_path.read_bytes())
    rng = random.Random(1)
    killed_mid_save = 0
    for _ in range(8):
        child = python(SAVE_LOOP, a_path, b_path, target)
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.02, 0.3))
        child.send_signal(signal.SIGKILL)
        child.communicate()
        assert target.read_bytes() in versions
        Tokenizer.load(target)
        leftovers = list(tmp_path.glob(".bpe-*.tmp"))  # the unfinished write, under its own name
        killed_mid_save += bool(leftovers)
        for p in leftovers:
            p.unlink()
    assert killed_mid_save, "no kill landed inside a save; the test proved nothing"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bpe", "b.bpe", "target.bpe"]


INTERRUPT = """
import sys, time
from pathlib import Path
import bpe
what = sys.argv[1]
tok = bpe.Tokenizer.train("hello world, this is some text " * 50, 300, progress=False)
big = ("The quick brown fox jumps over the lazy dog. " * 20 + "\\n") * 150_000   # 136 MB
try:
    print("start", flush=True)
    if what == "train-text":
        # The corpus file's random words, 40 MB: `big` (a dozen distinct
        # chunks) trains in ~0.2 s, too quick to be interrupted.
        bpe.Tokenizer.train(Path(sys.argv[2]).read_text() * 5, 5000, progress=False)
    elif what == "train-file":
        bpe.Tokenizer.train([Path(sys.argv[2])] * 20, 5000, progress=False)
    elif what == "encode":
        tok.encode_ordinary(big)
    elif what == "encode-special":
        tok.encode(big, allowed_special="all")
    elif what == "encode-batch":
        tok.encode_batch([big[i : i + 2_000_000] for i in range(0, len(big), 2_000_000)])
    elif what == "encode-batch-numpy":
        tok.encode_batch_to_numpy([big[i : i + 2_000_000] for i in range(0, len(big), 2_000_000)])
    elif what == "encode-batch-one":
        # One long document: its pieces are the batch's runs.
        tok.encode_batch([big], num_threads=2)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.parametrize(
    "what",
    ["train-text", "train-file", "encode", "encode-special", "encode-batch", "encode-batch-numpy", "encode-batch-one"],
)
def test_ctrl_c_returns_control_promptly(what, tmp_path):
    corpus = tmp_path / "corpus.txt"
    # 8 MB of random words (trained from 20 times over, or 5 times as one
    # str): seconds of training. Repeated prose, with few distinct chunks,
    # trained 60 MB before the interrupt landed.
    corpus.write_text(random_words(8 * MiB), encoding="utf-8")
    child = python(INTERRUPT, what, corpus, preexec_fn=default_sigint)
    # 0.3 s after "start": well inside the Rust call, which takes seconds.
    latency = interrupt(child, b"start\n", 0.3, timeout=60)
    assert latency < 2.5, f"{what}: {latency:.1f} s from Ctrl-C to KeyboardInterrupt"


def interrupt(child, ready: bytes, wait: float, timeout: float) -> float:
    """Sends Ctrl-C to `child` `wait` seconds after it printed `ready`;
    checks that it answered "interrupted"; returns the seconds from the
    signal to its exit."""
    assert child.stdout.readline() == ready
    time.sleep(wait)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = child.communicate(timeout=timeout)
    latency = time.monotonic() - sent
    assert out == b"interrupted\n", (out, err)
    return latency


SUPERBPE_START = """
import sys
from pathlib import Path
import bpe, bpe._tokenizer.training as T
real = T.feed_capped
def fed(trainer, *args, **kw):
    out = real(trainer, *args, **kw)
    if trainer.pattern() == T.STAGE2_PATTERN:
        print("stage 2", flush=True)  # its counts are made: its start (no merge yet) comes next
    return out
T.feed_capped = fed
try:
    bpe.Tokenizer.train(Path(sys.argv[1]), 3000, superbpe=2000, progress=False)
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_at_the_start_of_superbpe_stage_2(tmp_path):
    """SuperBPE's second stage works for a while before its first merge:
    each sentence encoded with stage 1's vocabulary, then the pairs of all
    of them (32 MB of distinct sentences: ~2 s here, tens of seconds on a
    GB). Ctrl-C there returns control promptly too."""
    corpus = tmp_path / "sentences.txt"
    corpus.write_text(random_sentences(32 * MiB), encoding="utf-8")
    child = python(SUPERBPE_START, corpus, preexec_fn=default_sigint)
    latency = interrupt(child, b"stage 2\n", 0.1, timeout=120)
    assert latency < 1.0, f"{latency:.1f} s from Ctrl-C to KeyboardInterrupt"


SIGINT_PROBE = """
import signal
h = signal.getsignal(signal.SIGINT)
print("default" if h is signal.default_int_handler else "ignored" if h == signal.SIG_IGN else repr(h))
"""


def test_ctrl_c_tests_work_when_sigint_is_ignored():
    """The Ctrl-C tests must pass under `nohup` or `cmd &` (SIGINT ignored and
    inherited by children): `default_sigint` gives their child Python its
    KeyboardInterrupt handler back. Checked here by ignoring SIGINT in this
    process, as such a shell would, and starting children both ways."""
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        plain = python(SIGINT_PROBE).communicate(timeout=60)[0]
        restored = python(SIGINT_PROBE, preexec_fn=default_sigint).communicate(timeout=60)[0]
    finally:
        signal.signal(signal.SIGINT, saved)
    assert plain == b"ignored\n"  # what broke the Ctrl-C tests under nohup
    assert restored == b"default\n"


def random_words(n_bytes: int, seed: int = 0) -> str:
    """Text of random words over 8 letters: many distinct chunks, so that
    training takes a while (seconds) however fast it gets."""
    table = bytes((b"abcdefgh" * 32)[i] if i % 9 else 32 for i in range(256))
    return random.Random(seed).randbytes(n_bytes).translate(table).decode("ascii")


def random_sentences(n_bytes: int, seed: int = 0) -> str:
    """Sentences of 4 to 14 random words (from 20,000 of 2 to 9 letters):
    nearly every sentence distinct, as SuperBPE's second stage meets them."""
    rng = random.Random(seed)
    words = ["".join(rng.choices("abcdefghijklmnop", k=rng.randint(2, 9))) for _ in range(20_000)]
    out, n = [], 0
    while n < n_bytes:
        s = " ".join(rng.choices(words, k=rng.randint(4, 14))) + (".\n" if rng.random() < 0.2 else ". ")
        out.append(s)
        n += len(s)
    return "".join(out)


@pytest.mark.parametrize("command", ["train", "encode"])
def test_ctrl_c_in_the_cli_leaves_no_file(command, tmp_path, tok):
    """`bpe train` (output file) and `bpe encode --out` (dataset directory)
    interrupted: exit status 130, and nothing written, not even a temporary."""
    corpus = tmp_path / "corpus.txt"
    if command == "train":
        # 40 MB: ~3 s of training. 10 MB once finished inside the 1 s wait
        # below (CI, release build), and the interrupt then came too late.
        corpus.write_text(random_words(40 * MiB), encoding="utf-8")
    else:
        corpus.write_text(TEXT * 800, encoding="utf-8")  # 80 MB
    tok.save(tmp_path / "tok.bpe")
    args = {"train": ["train", corpus, "--vocab", "20k", "-o", tmp_path / "out.bpe"],
            "encode": ["encode", "-t", tmp_path / "tok.bpe", corpus, "--out", tmp_path / "ds"]}[command]
    env = dict(os.environ, PYTHONUTF8="1")
    child = subprocess.Popen([sys.executable, "-m", "bpe", *map(str, args)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                             preexec_fn=default_sigint)
    deadline = time.monotonic() + 30
    if command == "train":
        time.sleep(1.0)
    else:  # interrupt once the dataset's temporary files exist: mid-write
        while not list(tmp_path.glob("ds/.bpe-*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, err = child.communicate(timeout=60)
    assert time.monotonic() - sent < 2.5
    assert child.returncode == 130 and err.decode().strip().endswith("bpe: interrupted"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "tok.bpe"]
