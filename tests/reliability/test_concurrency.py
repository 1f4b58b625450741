"""Reliability (docs/reliability.md), 4. Concurrency: threads sharing
one Tokenizer get what one thread gets.

Also: tests/tokenizer/test_encode.py::test_threads_share_one_tokenizer
(encode_ordinary); forks, thread pools and locks across processes:
tests/reliability/test_processes.py.
"""

from __future__ import annotations

import random
import threading

import pytest

from bpe import Tokenizer
from helpers import SHAKESPEARE

TEXT = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
SPECIALS = ["<|endoftext|>", "<|fim|>"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(TEXT, 400, special_tokens=SPECIALS, progress=False)


def test_eight_threads_on_one_tokenizer_equal_sequential(tok):
    texts = [TEXT[i : i + 7000] + f" <|fim|> {i} <|endoftext|>" for i in range(0, 90_000, 7000)]
    ids = [tok.encode(t, allowed_special="all") for t in texts]
    expected = {
        "encode": ids,
        "encode_ordinary": [tok.encode_ordinary(t) for t in texts],
        "encode_batch": tok.encode_batch(texts, allowed_special="all"),
        "decode": [tok.decode(i) for i in ids],
    }
    assert expected["decode"] == texts
    barrier = threading.Barrier(8)
    results, errors = [], []

    def work(seed):
        try:
            order = list(expected)
            random.Random(seed).shuffle(order)
            barrier.wait()
            got = {}
            for _ in range(3):
                for name in order:
                    if name == "encode":
                        got[name] = [tok.encode(t, allowed_special="all") for t in texts]
                    elif name == "encode_ordinary":
                        got[name] = [tok.encode_ordinary(t) for t in texts]
                    elif name == "encode_batch":
                        got[name] = tok.encode_batch(texts, allowed_special="all", num_threads=2)
                    else:
                        got[name] = [tok.decode(i) for i in ids]
                results.append(got)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 24 and all(r == expected for r in results)
