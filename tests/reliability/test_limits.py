"""Reliability (docs/reliability.md), 6. Limits: the documented limits
(docs/errors.md, "Limits") are the code's, and hold.
"""

from __future__ import annotations

import pytest

import bpe.data.dataset
from bpe import Tokenizer
from bpe._util.vocab import MAX_ID
from conftest import ROOT


def test_documented_limits_match_the_code():
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    limits = page[page.index("## Limits"):]
    assert f"{MAX_ID:,}" in limits
    assert f"{bpe.data.dataset.MAX_UNCUT_BYTES >> 20} MiB" in limits
    limits_rs = (ROOT / "rust" / "limits.rs").read_text(encoding="utf-8")
    assert f"MAX_UNCUT_BYTES: usize = {bpe.data.dataset.MAX_UNCUT_BYTES >> 20} << 20" in limits_rs
    vocab_rs = (ROOT / "rust" / "vocab.rs").read_text(encoding="utf-8")
    assert "pub const MAX_ID: Rank = (1 << 24) - 1;" in vocab_rs and MAX_ID == (1 << 24) - 1


def test_largest_id_is_usable():
    t = Tokenizer(pattern="gpt2", special_tokens={"<last>": MAX_ID})
    assert t.n_vocab == MAX_ID + 1
    assert t.decode(t.encode("a<last>", allowed_special="all")) == "a<last>"
    with pytest.raises(ValueError, match="out of range"):
        Tokenizer(pattern="gpt2", special_tokens={"<last>": MAX_ID + 1})
