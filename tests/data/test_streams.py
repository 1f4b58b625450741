"""The streaming paths of the command line (bpe/data/streams.py over
rust/py/stream.rs) against the Python API they must equal: encoding files
into id text, JSON lines and .npy; decoding id text, binary ids and .npy,
with every way of handling bytes that are not UTF-8. Arbitrary Unicode and
arbitrary ids (hypothesis), including ids that cut characters in two."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe.data import streams

CORPORA = Path(__file__).resolve().parents[2] / "corpora"


@pytest.fixture(scope="module")
def tok() -> bpe.Tokenizer:
    text = (CORPORA / "tinyshakespeare.txt").read_text(encoding="utf-8")[:100_000]
    text += (CORPORA / "multilingual_udhr.txt").read_text(encoding="utf-8")[:50_000]
    return bpe.Tokenizer.train(text, 600, progress=False)


def _through_fd(write) -> bytes:
    """What ``write(fd)`` writes into a fresh temporary file."""
    with tempfile.TemporaryFile() as f:
        write(f.fileno())
        f.seek(0)
        return f.read()


def _file(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


TEXTS = st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=300),
                 min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=TEXTS)
def test_encoded_streams_equal_encode(tok, texts):
    eot = tok.special_tokens["<|endoftext|>"]
    with tempfile.TemporaryDirectory() as d:
        paths = [_file(d, f"{k}.txt", t.encode("utf-8")) for k, t in enumerate(texts)]
        want = [tok.encode(t, disallowed_special=()) for t in texts]
        opts = dict(disallowed_special=[])
        ids = _through_fd(lambda fd: streams.encode_to_fd(tok, paths, fd, "ids", **opts)).decode()
        assert ids == "".join(" ".join(map(str, w)) + "\n" for w in want)
        lines = _through_fd(lambda fd: streams.encode_to_fd(tok, paths, fd, "json", **opts)).decode()
        assert lines == "".join(json.dumps(w) + "\n" for w in want)
        npy = _through_fd(lambda fd: streams.encode_to_fd(tok, paths, fd, "numpy", **opts))
        flat = [i for k, w in enumerate(want) for i in ([eot] if k else []) + w]
        body = npy[128:]
        assert npy[:128] == streams.npy_header(2, len(flat))
        assert [int.from_bytes(body[i : i + 2], "little") for i in range(0, len(body), 2)] == flat
        assert streams.count_tokens(tok, paths, **opts).ids == [len(w) for w in want]


def test_npy_output_is_what_numpy_reads(tok, tmp_path):
    np = pytest.importorskip("numpy")
    text = (CORPORA / "tinyshakespeare.txt").read_text(encoding="utf-8")[:30_000]
    src = tmp_path / "a.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "a.npy"
    with open(out, "wb") as f:
        streams.encode_to_fd(tok, [str(src)], f.fileno(), "numpy")
    array = np.load(out)
    assert array.dtype == np.uint16 and array.tolist() == tok.encode(text)
    # And decode reads numpy's own files, of every integer type it accepts.
    for dtype in ("<u2", "<u4", "<i4", "<i8", "<u8"):
        path = tmp_path / f"{dtype[1:]}.npy"
        np.save(path, array.astype(dtype))
        got = _through_fd(lambda fd: streams.decode_to_fd(tok, str(path), fd, dtype="npy", errors="strict"))
        assert got.decode("utf-8") == text, dtype
    np.save(tmp_path / "f.npy", array.astype("<f4"))
    with pytest.raises(ValueError, match="float32|<f4"):
        streams.decode_to_fd(tok, str(tmp_path / "f.npy"), 1, dtype="npy", errors="strict")


# Ids of single bytes (0..255) cut characters; the others are whole tokens.
IDS = st.lists(st.one_of(st.integers(0, 255), st.integers(0, 599), st.sampled_from([0xC3, 0xE2, 0x82, 0xF0, 0x9F])),
               max_size=400)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=IDS, sep=st.sampled_from([" ", "\n", ", ", "\t"]))
def test_decoded_streams_equal_decode(tok, ids, sep):
    raw = tok.decode_bytes(ids)
    with tempfile.TemporaryDirectory() as d:
        text_ids = _file(d, "ids.txt", ("[" + sep.join(map(str, ids)) + "]\n").encode())
        bin_ids = _file(d, "ids.bin", b"".join(i.to_bytes(4, "little") for i in ids))
        for path, dtype in ((text_ids, None), (bin_ids, "uint32")):
            run = lambda errors: _through_fd(lambda fd: streams.decode_to_fd(tok, path, fd, dtype=dtype, errors=errors))
            assert run("bytes") == raw
            assert run("replace").decode("utf-8") == tok.decode(ids, errors="replace")
            try:
                want = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                with pytest.raises(ValueError, match=f"byte offset {e.start} of the output"):
                    run("strict")
            else:
                assert run("strict").decode("utf-8") == want


def test_long_streams_cross_pieces(tok, tmp_path):
    """Inputs of several of the core's 1 MiB reads, with characters cut
    between tokens everywhere: the same as decoding in one piece."""
    whole = [i for i in range(256, tok.n_vocab - 1) if _is_utf8(tok.token_bytes(i))]
    ids = []
    for k in range(400_000):
        ids += [0xC3, 0xA9] if k % 3 else [0xE2, 0x82, 0xAC, whole[k % len(whole)]]
    ids.append(0xF0)  # a character cut at the very end
    text_path = tmp_path / "ids.txt"
    text_path.write_text(" ".join(map(str, ids)))
    bin_path = tmp_path / "ids.bin"
    bin_path.write_bytes(b"".join(i.to_bytes(2, "little") for i in ids))
    assert text_path.stat().st_size > 3 << 20 and bin_path.stat().st_size > 2 << 20
    for path, dtype in ((text_path, None), (bin_path, "uint16")):
        got = _through_fd(lambda fd: streams.decode_to_fd(tok, str(path), fd, dtype=dtype, errors="replace"))
        assert got.decode("utf-8") == tok.decode(ids)
        with pytest.raises(ValueError, match=f"id number {len(ids) - 1}"):
            streams.decode_to_fd(tok, str(path), os.open(os.devnull, os.O_WRONLY), dtype=dtype, errors="strict")


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
