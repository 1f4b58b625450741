"""save_pretrained / from_pretrained (bpe/_tokenizer/pretrained.py) against the real
transformers package: the folder we write loads as a fast tokenizer with
our ids, and we read folders transformers writes. Local paths only."""

import functools
import json
import os
import subprocess
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
from hypothesis import given, strategies as st

from bpe import Tokenizer
from conftest import CORPORA, CORPUS_FILES, ROOT, SHARED, require_vocab

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install 'bpe[hf]')")

SPECIALS = ["<|endoftext|>", "<|pad|>", "<|im_start|>"]


@functools.lru_cache(maxsize=None)
def ours(key):
    if key in ("gpt2", "gpt4", "gpt4o"):
        text = (CORPORA / "tinyshakespeare.txt").read_text()[:300_000] + (CORPORA / "multilingual_udhr.txt").read_text()
        return Tokenizer.train(text, 3000, pattern=key, special_tokens=SPECIALS, progress=False)
    require_vocab(key)
    return Tokenizer.from_tiktoken(key)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """saved(key) -> (our tokenizer, transformers' tokenizer of the folder
    save_pretrained wrote, the folder); made once per key."""
    made = {}

    def get(key):
        if key not in made:
            directory = tmp_path_factory.mktemp(f"pretrained-{key}")
            tok = ours(key)
            tok.save_pretrained(directory)
            made[key] = (tok, transformers.AutoTokenizer.from_pretrained(directory), directory)
        return made[key]

    return get


KEYS = ["gpt2", "gpt4", "gpt4o", "cl100k_base", "o200k_base"]


@pytest.mark.parametrize("key", KEYS)
def test_transformers_loads_a_fast_tokenizer_with_our_ids(key, saved):
    tok, hf, directory = saved(key)
    assert hf.is_fast
    for path in CORPUS_FILES:
        text = path.read_text()
        ids = tok.encode(text, allowed_special="all")
        assert hf(text, add_special_tokens=False)["input_ids"] == ids, path.name
        assert hf.encode(text) == ids, path.name  # nothing added around the text either
        assert hf.decode(ids) == text, path.name
    assert Tokenizer.from_pretrained(directory) == tok


@pytest.mark.parametrize("key", ["gpt4", "cl100k_base", "o200k_base"])
@pytest.mark.parametrize("name", ["small/emoji-test.txt", "small/input.txt", "mid/flores200_devtest_184langs.txt.xz",
                                  "mid/code_mix.txt.xz"])
def test_shared_corpora(key, name, saved):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} not found: the large corpora are only in the project's shared/ folder")
    if path.suffix == ".xz":
        import lzma

        text = lzma.open(path, "rt", encoding="utf-8").read(500_000)
    else:
        text = path.read_text(encoding="utf-8")
    tok, hf, _ = saved(key)
    ids = tok.encode(text, allowed_special="all")
    assert hf(text, add_special_tokens=False)["input_ids"] == ids
    assert hf.decode(ids) == text


@pytest.mark.parametrize("key", KEYS)
def test_special_tokens(key, saved):
    tok, hf, _ = saved(key)
    specials = list(tok.special_tokens)
    text = f"{specials[0]}Hello{specials[-1]} world {specials[0]}\n\n  x"
    ids = tok.encode(text, allowed_special="all")
    assert hf(text, add_special_tokens=False)["input_ids"] == ids
    assert hf.decode(ids) == text
    assert set(hf.all_special_tokens) >= set(specials)
    if "<|endoftext|>" in specials:
        assert hf.eos_token == "<|endoftext|>"
        assert hf.eos_token_id == tok.special_tokens["<|endoftext|>"]


@pytest.mark.parametrize("key", ["gpt4", "cl100k_base"])
@given(text=st.text(st.characters(codec="utf-8"), max_size=60))
def test_hypothesis(key, saved, text):
    tok, hf, _ = saved(key)
    ids = tok.encode(text, allowed_special="all")
    assert hf(text, add_special_tokens=False)["input_ids"] == ids
    assert hf.decode(ids) == text


def test_files_written(tmp_path):
    tok = ours("gpt4")
    paths = tok.save_pretrained(tmp_path / "new" / "dir")  # made if missing
    assert [os.path.basename(p) for p in paths] == ["tokenizer.json", "tokenizer_config.json",
                                                    "special_tokens_map.json"]
    config = json.loads((tmp_path / "new" / "dir" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["clean_up_tokenization_spaces"] is False
    roles = json.loads((tmp_path / "new" / "dir" / "special_tokens_map.json").read_text())
    assert roles == {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                     "additional_special_tokens": ["<|pad|>", "<|im_start|>"]}
    # Saving again over the folder replaces the files.
    tok.save_pretrained(tmp_path / "new" / "dir")
    assert Tokenizer.from_pretrained(tmp_path / "new" / "dir") == tok


def test_reads_folders_transformers_writes(tmp_path, saved):
    """A folder from transformers' own save_pretrained, and a hub-style
    folder holding only a tokenizer.json: both read back to our tokenizer."""
    tok, hf, _ = saved("gpt2")
    hf.save_pretrained(tmp_path / "theirs")
    assert Tokenizer.from_pretrained(tmp_path / "theirs") == tok
    only = tmp_path / "only"
    only.mkdir()
    tok.save_huggingface(only / "tokenizer.json")
    assert Tokenizer.from_pretrained(str(only)) == tok
    assert Tokenizer.from_pretrained(only / "tokenizer.json") == tok  # the file itself


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="local folders only"):
        Tokenizer.from_pretrained("openai-community/gpt2")
    with pytest.raises(FileNotFoundError, match="no such directory"):
        Tokenizer.from_pretrained(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "vocab.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match="has no tokenizer.json.*vocab.txt"):
        Tokenizer.from_pretrained(tmp_path / "empty")
    with pytest.raises(TypeError, match="directory must be a str or a path"):
        Tokenizer.from_pretrained(3)
    tok = ours("gpt4")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        tok.save_pretrained(tmp_path / "file")
    with pytest.raises(TypeError, match="directory must be a str or a path"):
        tok.save_pretrained(None)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="not a HuggingFace tokenizer.json"):
        Tokenizer.from_pretrained(tmp_path / "bad")


def test_save_pretrained_needs_no_transformers(tmp_path):
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "from bpe import Tokenizer\n"
        "tok = Tokenizer.train('hello world ' * 50, 270, progress=False)\n"
        f"tok.save_pretrained({str(tmp_path / 'out')!r})\n"
        f"assert Tokenizer.from_pretrained({str(tmp_path / 'out')!r}) == tok\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
