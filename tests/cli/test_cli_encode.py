"""`bpe encode`, `bpe decode` and `bpe info` on the command line, run in a
child process (tests/helpers.py): ids to stdout, to files and datasets, and
back; stdin and --text; peak memory that does not grow with the input.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bpe
from helpers import (MULTILINGUAL, SHAKESPEARE, assert_clean_failure, no_temp_files, ok, parse_ids, peak_rss_mb,
                     run)
from helpers import corpus, sample, tok, tok_path, workdir  # noqa: F401  (fixtures)


def test_encode_to_stdout(workdir, tok_path, tok, sample):
    result = ok(run("encode", "-t", tok_path, sample, "--special-as-text", cwd=workdir))
    lines = result.stdout.split("\n")
    assert lines[-1] == "" and len(lines) == 2  # one line of ids per file
    ids = parse_ids(lines[0])
    text = sample.read_bytes().decode("utf-8")
    assert tok.decode(ids) == text
    # --special-as-text: special-token text in a file is ordinary text.
    assert tok.special_tokens["<|endoftext|>"] not in ids
    assert ids == tok.encode_ordinary(text)


def test_special_token_text_is_an_error_by_default(workdir, tok_path, tok, sample):
    """As in Python's `encode` (tiktoken's rule): special-token text in the
    input is an error naming the file and offset, and the two flags that
    decide what to do with it; the same for the dataset path and `info`."""
    text = sample.read_bytes()
    at = text.index(b"<|endoftext|>")
    line = text[:at].count(b"\n") + 1
    for args in (["encode"], ["encode", "-o", workdir / "refused-ds"], ["info"]):
        error = assert_clean_failure(run(*args, "-t", tok_path, sample, cwd=workdir), stdout_ok=True)
        assert f"{sample} holds the special token \"<|endoftext|>\" at byte offset {at} (line {line})" in error
        assert "--special-as-text" in error and "--allow-special" in error
    assert not (workdir / "refused-ds").exists()
    error = assert_clean_failure(run("encode", "-t", tok_path, "--text", "a <|endoftext|> b", cwd=workdir))
    assert "--special-as-text" in error and "--allow-special" in error
    # Python says the same.
    with pytest.raises(ValueError, match="disallowed"):
        tok.encode(text.decode("utf-8"))
    both = run("encode", "-t", tok_path, sample, "--allow-special", "--special-as-text", cwd=workdir)
    assert "not allowed with argument" in assert_clean_failure(both, usage=True)


def test_encode_several_files(workdir, tok_path, tok, sample, corpus):
    result = ok(run("encode", "-t", tok_path, sample, corpus, "--special-as-text", cwd=workdir))
    lines = result.stdout.split("\n")
    assert len(lines) == 3 and lines[-1] == ""
    assert tok.decode(parse_ids(lines[0])) == sample.read_bytes().decode("utf-8")
    assert tok.decode(parse_ids(lines[1])) == corpus.read_bytes().decode("utf-8")


def test_encode_allow_special(workdir, tok_path, tok, sample):
    result = ok(run("encode", "-t", tok_path, sample, "--allow-special", cwd=workdir))
    ids = parse_ids(result.stdout)
    text = sample.read_bytes().decode("utf-8")
    assert ids == tok.encode(text, allowed_special="all")
    assert tok.special_tokens["<|endoftext|>"] in ids
    assert tok.decode(ids) == text


def read_bin(path: Path, width: int) -> list[int]:
    raw = path.read_bytes()
    return [int.from_bytes(raw[i : i + width], "little") for i in range(0, len(raw), width)]


def test_encode_out_dir_writes_a_dataset(tmp_path, tok_path, tok, sample, corpus):
    """--out DIR: train.bin / val.bin (flat little-endian uint16 here) and
    meta.json; nothing on stdout; <|endoftext|> between the files."""
    out = tmp_path / "ds"
    result = ok(run("encode", "-t", tok_path, sample, corpus, "--out", out, "--val-fraction", "0.2",
                    "--special-as-text", cwd=tmp_path))
    assert result.stdout == ""
    assert str(out) in result.stderr and "train.bin" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "train.bin", "val.bin"]
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["dtype"] == "uint16" and meta["split"]["val_fraction"] == 0.2
    eot = tok.special_tokens["<|endoftext|>"]
    texts = {"train": [], "val": []}
    for f in (sample, corpus):
        raw = f.read_bytes()
        # Each file is cut at the first line start after 80% of its bytes.
        cut = raw.index(b"\n", int(round(len(raw) * 0.8))) + 1
        texts["train"].append(raw[:cut].decode("utf-8"))
        texts["val"].append(raw[cut:].decode("utf-8"))
    for split, parts in texts.items():
        ids = read_bin(out / f"{split}.bin", 2)
        expected = tok.encode_ordinary(parts[0]) + [eot] + tok.encode_ordinary(parts[1])
        assert ids == expected, split
        assert meta["splits"][split]["tokens"] == len(ids)
        assert meta["splits"][split]["bytes"] == sum(len(p.encode("utf-8")) for p in parts)
    assert no_temp_files(out) and no_temp_files(tmp_path)
    # Writing again over an existing dataset replaces it.
    # -o is --out; meta.json names the sources and the tokenizer as given.
    ok(run("encode", "-t", tok_path.name, corpus.name, "-o", out, cwd=corpus.parent))
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["splits"]["train"]["documents"] == 1 and meta["split"]["val_fraction"] == 0.1
    assert meta["sources"] == [corpus.name] and meta["tokenizer"]["file"] == tok_path.name


def test_decode_stdin(workdir, tok_path, tok, sample):
    text = sample.read_bytes().decode("utf-8")
    ids = ok(run("encode", "-t", tok_path, sample, "--special-as-text", cwd=workdir)).stdout
    result = ok(run("decode", "-t", tok_path, cwd=workdir, stdin=ids))
    assert result.stdout == text
    # "-" means stdin too; ids may be spread over lines.
    spread = "\n".join(ids.split())
    assert ok(run("decode", "-t", tok_path, "-", cwd=workdir, stdin=spread)).stdout == text


def test_decode_file(tmp_path, tok_path, sample):
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(ok(run("encode", "-t", tok_path, sample, "--special-as-text", cwd=tmp_path)).stdout, encoding="utf-8")
    result = ok(run("decode", "-t", tok_path, ids_file, cwd=tmp_path))
    assert result.stdout == sample.read_bytes().decode("utf-8")


def test_decode_empty_input(workdir, tok_path):
    assert ok(run("decode", "-t", tok_path, cwd=workdir, stdin="")).stdout == ""


def test_info(workdir, tok_path, tok):
    out = ok(run("info", "-t", tok_path, cwd=workdir)).stdout
    m = re.search(r"vocab size:\s*(\d+)", out)
    assert m and int(m.group(1)) == tok.n_vocab == 500
    assert "<|endoftext|>" in out
    assert "bytes per token" not in out


def test_info_with_file(workdir, tok_path, tok, sample):
    out = ok(run("info", "-t", tok_path, sample, "--special-as-text", cwd=workdir)).stdout
    m = re.search(r"vocab size:\s*(\d+)", out)
    assert m and int(m.group(1)) == tok.n_vocab
    m = re.search(r"(\d+(?:\.\d+)?) bytes per token", out)
    assert m, out
    text = sample.read_bytes().decode("utf-8")
    expected = len(text.encode("utf-8")) / len(tok.encode_ordinary(text))
    assert float(m.group(1)) == pytest.approx(expected, abs=0.0006)
    assert 1.0 < float(m.group(1)) < 10.0


def test_decode_negative_id_message_names_range(workdir, tok_path, tok):
    """Both ends of the range are reported the same way (negative ids get 0..n_vocab-1)."""
    low = assert_clean_failure(run("decode", "-t", tok_path, cwd=workdir, stdin="-1"))
    assert f"0..{tok.n_vocab - 1}" in low


def test_decode_too_large_message_names_largest_id(workdir, tok_path, tok):
    high = assert_clean_failure(run("decode", "-t", tok_path, cwd=workdir, stdin=str(tok.n_vocab)))
    assert f"0..{tok.n_vocab - 1}" in high
    assert f"0..{tok.n_vocab}" not in high.replace(f"0..{tok.n_vocab - 1}", "")


# -- issue 34: round trips, streaming, one set of flags, any tokenizer ------------


def test_round_trip_through_a_dataset(tmp_path, tok_path, tok, sample, corpus):
    """`decode` reads the .bin files that `encode -o DIR` writes (its dtype
    from meta.json beside it, or --dtype), and .npy, json and id text."""
    ds = tmp_path / "ds"
    ok(run("encode", "-t", tok_path, sample, corpus, "-o", ds, "--special-as-text", "-q", cwd=tmp_path))
    eot = "<|endoftext|>"
    texts = [f.read_bytes() for f in (sample, corpus)]
    cuts = [t.index(b"\n", int(round(len(t) * 0.9))) + 1 for t in texts]
    want = {
        "train": texts[0][: cuts[0]].decode() + eot + texts[1][: cuts[1]].decode(),
        "val": texts[0][cuts[0] :].decode() + eot + texts[1][cuts[1] :].decode(),
    }
    for split in ("train", "val"):
        assert ok(run("decode", "-t", tok_path, ds / f"{split}.bin", cwd=tmp_path)).stdout == want[split]
    # Without meta.json, --dtype says how wide the ids are.
    lone = tmp_path / "lone.bin"
    shutil.copy(ds / "train.bin", lone)
    assert "--dtype" in assert_clean_failure(run("decode", "-t", tok_path, lone, cwd=tmp_path))
    assert ok(run("decode", "-t", tok_path, lone, "--dtype", "uint16", cwd=tmp_path)).stdout == want["train"]
    # The wrong width is caught when the length does not divide.
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x00\x00\x02\x00")  # id 1, then half an id
    assert "multiple of 4 bytes" in assert_clean_failure(
        run("decode", "-t", tok_path, odd, "--dtype", "uint32", cwd=tmp_path), stdout_ok=True)

    # .npy, json and ids: decode gives back the files, one after the other
    # (.npy has <|endoftext|> between them, as a dataset has).
    both = texts[0].decode() + texts[1].decode()
    for name, expected in (("ids.npy", texts[0].decode() + eot + texts[1].decode()),
                           ("ids.jsonl", both), ("ids.txt", both)):
        out = tmp_path / name
        ok(run("encode", "-t", tok_path, sample, corpus, "-o", out, "--special-as-text", cwd=tmp_path))
        assert ok(run("decode", "-t", tok_path, out, cwd=tmp_path)).stdout == expected, name
    np = pytest.importorskip("numpy")
    array = np.load(tmp_path / "ids.npy")
    assert array.dtype == np.uint16
    assert array.tolist() == tok.encode_ordinary(texts[0].decode()) + [tok.special_tokens[eot]] + tok.encode_ordinary(texts[1].decode())
    lines = (tmp_path / "ids.jsonl").read_text().splitlines()
    assert [json.loads(l) for l in lines] == [tok.encode_ordinary(t.decode()) for t in texts]


def test_decode_errors_and_bytes(tmp_path, tok_path, tok):
    """Ids cut mid-character: U+FFFD by default (as `Tokenizer.decode`), an
    error naming the id with --errors strict, the raw bytes with --bytes."""
    ids = tok.encode("héllo wörld")
    e_acute = next(k for k, i in enumerate(ids) if b"\xc3" in tok.token_bytes(i))
    cut = ids[:e_acute] + [0xC3] + ids[e_acute + 1 :] if tok.token_bytes(ids[e_acute]) != b"\xc3" else ids[:e_acute + 1] + ids[e_acute + 2 :]
    text = " ".join(map(str, cut))
    assert ok(run("decode", "-t", tok_path, cwd=tmp_path, stdin=text)).stdout == tok.decode(cut)
    assert "\ufffd" in tok.decode(cut)
    error = assert_clean_failure(run("decode", "-t", tok_path, "--errors", "strict", cwd=tmp_path, stdin=text),
                                 stdout_ok=True)
    assert "not UTF-8" in error and "id number" in error and "--errors replace" in error
    raw = subprocess.run([sys.executable, "-m", "bpe", "decode", "-t", tok_path, "--bytes"], input=text.encode(),
                         capture_output=True, cwd=tmp_path, timeout=60)
    assert raw.returncode == 0 and raw.stdout == tok.decode_bytes(cut)


#: The peak memory a streamed command may use, whatever the input size. The
#: measured peak on 200 MB (docs/errors.md, "Limits"): about 190 MB with GPT-2's
#: vocabulary, of which ~75 MB are Python, the tokenizer and its tables, and
#: 64 MiB the chunk cache at its cap; it was 3.7 GB before streaming.
STREAM_MEMORY_MB = 400


def test_encode_decode_info_stream_in_bounded_memory(tmp_path, tok_path, tok):
    """A 200 MB input through encode (stdout, -o .npy), decode (id text,
    .npy) and info: peak memory stays under a cap that does not grow with
    the input, and the round trips give back the input byte for byte."""
    piece = SHAKESPEARE.read_bytes() + MULTILINGUAL.read_bytes()
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        for _ in range(200_000_000 // len(piece) + 1):
            f.write(piece)
    size = big.stat().st_size
    assert size >= 200_000_000

    ids_txt = tmp_path / "big.ids"
    with open(ids_txt, "wb") as out:
        rc, mb = peak_rss_mb(["encode", "-t", tok_path, big, "-q"], stdout=out)
    assert rc == 0 and mb < STREAM_MEMORY_MB, f"encode to stdout: exit {rc}, peak {mb:.0f} MB"
    rc, mb = peak_rss_mb(["encode", "-t", tok_path, big, "-o", tmp_path / "big.npy", "-q"])
    assert rc == 0 and mb < STREAM_MEMORY_MB, f"encode -o .npy: exit {rc}, peak {mb:.0f} MB"
    for source in (ids_txt, tmp_path / "big.npy"):
        back = tmp_path / "back.txt"
        with open(back, "wb") as out:
            rc, mb = peak_rss_mb(["decode", "-t", tok_path, source], stdout=out)
        assert rc == 0 and mb < STREAM_MEMORY_MB, f"decode {source.name}: exit {rc}, peak {mb:.0f} MB"
        assert back.stat().st_size == size and _same_file(back, big), source.name
        back.unlink()
    with open(big, "rb") as stdin:  # stdin too
        rc, mb = peak_rss_mb(["info", "-t", tok_path, "-"], stdin=stdin)
    assert rc == 0 and mb < STREAM_MEMORY_MB, f"info: exit {rc}, peak {mb:.0f} MB"


def _same_file(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 22), fb.read(1 << 22)
            if x != y:
                return False
            if not x:
                return True


def test_stdin_and_text_everywhere(tmp_path, tok_path, tok, corpus):
    """`-` is standard input for every command that takes FILE; `--text`
    encodes a string given on the command line."""
    text = corpus.read_text(encoding="utf-8")[:20_000]
    ids = tok.encode(text)
    assert parse_ids(ok(run("encode", "-t", tok_path, "-", cwd=tmp_path, stdin=text)).stdout) == ids
    assert json.loads(ok(run("encode", "-t", tok_path, "--text", "hi there", "--format", "json", cwd=tmp_path)).stdout) \
        == tok.encode("hi there")
    assert ok(run("decode", "-t", tok_path, "-", cwd=tmp_path, stdin=" ".join(map(str, ids)))).stdout == text
    info = ok(run("info", "-t", tok_path, "-", cwd=tmp_path, stdin=text)).stdout
    assert f"<stdin>: {len(ids):,} tokens" in info
    out = tmp_path / "from-stdin.bpe"
    ok(run("train", "-", "--vocab", "300", "-o", out, "-q", cwd=tmp_path, stdin=text))
    assert bpe.Tokenizer.load(out) == bpe.Tokenizer.train(text, 300, progress=False)
    # Errors in what came on stdin name <stdin>, never a temporary file.
    error = assert_clean_failure(run("train", "-", "--vocab", "300", "-o", out, cwd=tmp_path, stdin="a\0b"))
    assert "<stdin>" in error and "tmp" not in error
    # Arguments that do not go together are usage errors (exit status 2).
    error = assert_clean_failure(run("encode", "-t", tok_path, "-", "-", cwd=tmp_path, stdin="x"), usage=True)
    assert "once" in error
    usage = assert_clean_failure(run("encode", "-t", tok_path, "--text", "x", corpus, cwd=tmp_path), usage=True)
    assert "not both" in usage


def test_output_flag_on_every_command_that_writes(tmp_path, tok_path, tok, corpus):
    """-o/--output everywhere; --out stays as encode's alias."""
    ok(run("train", corpus, "--vocab", "300", "--output", tmp_path / "t.bpe", "-q", cwd=tmp_path))
    for flag in ("-o", "--output", "--out"):
        out = tmp_path / f"ids{flag}.txt"
        ok(run("encode", "-t", tok_path, corpus, flag, out, cwd=tmp_path))
        assert parse_ids(out.read_text()) == tok.encode(corpus.read_text(encoding="utf-8"))
        back = tmp_path / f"back{flag}.txt"
        ok(run("decode", "-t", tok_path, out, "-o" if flag == "--out" else flag, back, cwd=tmp_path))
        assert back.read_bytes() == corpus.read_bytes()
