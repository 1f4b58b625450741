"""The one-line swap (``import bpe.tiktoken as tiktoken``) on a program
written for tiktoken, and where OpenAI's rank files come from: tiktoken's
cache, checked by sha256, without tiktoken; a missing file is one line that
names it and where to put it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import pytest

import bpe
from conftest import ROOT, require_vocab
import fetch_vocabs

PROGRAM = textwrap.dedent('''
    import pickle
    {import_line}
    out = []
    enc = tiktoken.get_encoding("cl100k_base")
    out.append((enc.name, enc.n_vocab, enc.max_token_value, enc.eot_token, sorted(enc.special_tokens_set)))
    text = "Hello, world! <|endoftext|> The quick brown fox 🦊 jumps.\\n\\n  over 12345 lazy dogs"
    out.append(enc.encode(text, allowed_special={{"<|endoftext|>"}}))
    out.append(enc.encode(text, disallowed_special=()))
    try:
        enc.encode(text)
    except ValueError:
        out.append("ValueError")
    out.append(enc.encode_ordinary_batch([text, text[:10]]))
    out.append(enc.encode_batch([text], allowed_special="all"))
    out.append(enc.decode(enc.encode_ordinary(text)))
    out.append(enc.decode_with_offsets(enc.encode_ordinary("héllo wörld")))
    out.append([enc.decode_single_token_bytes(t) for t in enc.encode_ordinary(text)])
    out.append(enc.encode_single_token("hello"))
    try:
        enc.decode([enc.max_token_value + 1])
    except KeyError:
        out.append("KeyError")
    out.append(tiktoken.encoding_name_for_model("gpt-4o-mini"))
    out.append(tiktoken.encoding_for_model("gpt-4").name)
    out.append(pickle.loads(pickle.dumps(enc)).encode("x"))
    mine = tiktoken.Encoding("mine", pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks,
                             special_tokens={{"<|endoftext|>": 100257}})
    out.append((mine.name, mine.encode("hi there"), len(mine._mergeable_ranks)))
    print(repr(out))
''')


def run(import_line: str, env=None) -> str:
    done = subprocess.run([sys.executable, "-c", PROGRAM.format(import_line=import_line)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_tiktoken_program_runs_unchanged_on_bpe():
    require_vocab("cl100k_base")
    assert run("import bpe.tiktoken as tiktoken") == run("import tiktoken")


def without_tiktoken(cache_dir) -> dict:
    """An environment where ``import tiktoken`` fails (a stub that raises)
    and tiktoken's cache is ``cache_dir``."""
    stub = cache_dir.parent / "no-tiktoken"
    stub.mkdir(exist_ok=True)
    (stub / "tiktoken.py").write_text("raise ImportError('tiktoken is not installed (test stub)')\n")
    return {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(stub)}


def test_openai_encodings_load_from_the_cache_without_tiktoken(tmp_path):
    require_vocab("cl100k_base")
    env = without_tiktoken(fetch_vocabs.CACHE)
    code = ("import bpe, sys\n"
            "assert 'tiktoken' not in sys.modules or sys.modules['tiktoken'] is None\n"
            "e = bpe.get_encoding('cl100k_base'); print(e.encode('hello world'), e.name)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[15339,", "1917]", "cl100k_base"]


def test_a_missing_rank_file_is_one_line_naming_it_and_where_to_put_it(tmp_path):
    empty = tmp_path / "cache"
    empty.mkdir()
    env = without_tiktoken(empty)
    code = "import bpe; bpe.get_encoding('o200k_base')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("FileNotFoundError: o200k_base: o200k_base.tiktoken is not in tiktoken's cache")
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    assert f"save {url} as {empty / hashlib.sha1(url.encode()).hexdigest()}" in last
    assert "tiktoken, which would fetch it, is not installed" in last
    # The command line says it in one line too.
    cli = subprocess.run([sys.executable, "-m", "bpe", "encode", "-t", "o200k", "--text", "hi"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert cli.returncode == 1 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert "o200k_base.tiktoken is not in tiktoken's cache" in cli.stderr


def test_a_damaged_cached_file_is_refused_by_its_checksum(tmp_path):
    require_vocab("cl100k_base")
    cache = tmp_path / "cache"
    cache.mkdir()
    good = fetch_vocabs.cache_path("cl100k_base")
    (cache / good.name).write_bytes(good.read_bytes()[:-10])
    env = without_tiktoken(cache)
    done = subprocess.run([sys.executable, "-c", "import bpe; bpe.get_encoding('cl100k_base')"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert "does not have the sha256 tiktoken expects" in done.stderr.strip().splitlines()[-1]


def test_register_ones_own_encoding(tmp_path):
    tok = bpe.Tokenizer.train((ROOT / "corpora" / "tinyshakespeare.txt").read_text()[:100_000], 300)
    tok.save(tmp_path / "mine.bpe")
    bpe.register_encoding("test_mine_file", lambda: bpe.Tokenizer.load(tmp_path / "mine.bpe"))
    mine = bpe.get_encoding("test_mine_file")
    assert mine == tok and mine.name == "mine" and bpe.get_encoding("test_mine_file") is mine
    bpe.register_encoding("test_mine_kwargs", lambda: {"name": "kw", "pat_str": tok.pattern,
                                                       "mergeable_ranks": tok._mergeable_ranks,
                                                       "special_tokens": tok._special_tokens})
    assert bpe.get_encoding("test_mine_kwargs").encode("hello") == tok.encode("hello")
    assert "test_mine_file" in bpe.list_encoding_names()
    with pytest.raises(ValueError, match="already registered"):
        bpe.register_encoding("cl100k_base", lambda: tok)
    with pytest.raises(ValueError, match="Unknown encoding nope"):
        bpe.get_encoding("nope")
