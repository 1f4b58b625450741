"""OpenAI's encodings (bpe/formats/openai.py, and the table of bare rank files
in bpe/formats/specs.py) say what tiktoken says, field by field, offline.

tiktoken's own definitions (``tiktoken_ext.openai_public``) are run with their
rank-file loaders replaced by a stub that records what would be read (URL and
sha256) and reads nothing: so every encoding is checked, p50k's too, whose
rank file no test extra ships. The number of ranks is checked against
tiktoken's ``explicit_n_vocab`` where it states one, and against the cached
rank file (tests/fetch_vocabs.py) where it is there.
"""

from __future__ import annotations

import pytest

import fetch_vocabs
from bpe.formats import openai
from bpe.formats.specs import KNOWN

pytest.importorskip("tiktoken")
from tiktoken_ext import openai_public  # noqa: E402


@pytest.fixture
def definitions(monkeypatch) -> dict[str, dict]:
    """tiktoken's definition of each encoding, with ``files``: the rank files
    it would read, as (URL, sha256), none of them read."""

    def definition(name: str) -> dict:
        files = []

        def load_tiktoken_bpe(url, expected_hash=None):
            files.append((url, expected_hash))
            return {}

        def data_gym_to_mergeable_bpe_ranks(**kwargs):  # gpt2: GPT-2's vocab.bpe and encoder.json
            files.append(("data-gym", kwargs["vocab_bpe_hash"]))
            return {}

        monkeypatch.setattr(openai_public, "load_tiktoken_bpe", load_tiktoken_bpe)
        monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", data_gym_to_mergeable_bpe_ranks)
        return {**openai_public.ENCODING_CONSTRUCTORS[name](), "files": files}

    return {name: definition(name) for name in openai_public.ENCODING_CONSTRUCTORS}


def test_every_encoding_of_tiktoken_is_known(definitions):
    assert list(openai.ENCODINGS) == list(definitions)  # tiktoken's order too


def test_patterns_special_tokens_and_sizes_are_tiktokens(definitions):
    for name, enc in openai.ENCODINGS.items():
        theirs = definitions[name]
        assert enc.name == name
        assert enc.pattern == theirs["pat_str"], name
        assert list(enc.special_tokens.items()) == list(theirs["special_tokens"].items()), name
        assert enc.n_vocab == theirs.get("explicit_n_vocab"), name
        if enc.n_vocab is not None:  # tiktoken checks n_vocab == ranks + special tokens
            assert enc.n_ranks == enc.n_vocab - len(enc.special_tokens), name


def test_rank_files_are_tiktokens(definitions):
    """The file each encoding reads, and the sha256 it is checked by. gpt2's
    ranks are r50k_base's (tiktoken makes them from GPT-2's original files)."""
    for name, enc in openai.ENCODINGS.items():
        (url, sha256), = definitions[name]["files"]
        if name == "gpt2":
            assert url == "data-gym" and enc.file == "r50k_base"
            continue
        assert (url, sha256) == (enc.url, enc.sha256), name
        assert enc.sha256 == fetch_vocabs.SHA256.get(enc.file, enc.sha256), name


@pytest.mark.parametrize("name", sorted({e.file for e in openai.ENCODINGS.values()}))
def test_number_of_ranks_in_the_cached_file(name):
    path = fetch_vocabs.cache_path(name)
    if not path.exists():
        pytest.skip(f"{name}.tiktoken is not in {fetch_vocabs.CACHE} (no test extra ships it)")
    lines = [line for line in path.read_bytes().splitlines() if line]
    assert {enc.n_ranks for enc in openai.ENCODINGS.values() if enc.file == name} == {len(lines)}


def test_bare_rank_files_known_by_name(definitions):
    """specs.KNOWN, what a ``.tiktoken`` file alone is taken to be: (split
    pattern, special tokens, number of ranks), tiktoken's."""
    assert set(KNOWN) <= set(definitions)
    for name, (pattern, specials, n_ranks) in KNOWN.items():
        theirs, enc = definitions[name], openai.ENCODINGS[name]
        assert (pattern, specials) == (theirs["pat_str"], theirs["special_tokens"]), name
        assert n_ranks == enc.n_ranks, name
