"""The public Python API, used the way a typed program would: tests/test_typing.py
runs `mypy --strict` on this file (and runs it), so an annotation that is
missing or wrong in bpe/ fails there. Run it from the repository root:

    python examples/typed_api.py
"""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import bpe
from bpe import Counts, StreamDecoder, Tokenizer, TokenizerFileError

CORPUS = Path(__file__).resolve().parents[1] / "corpora" / "tinyshakespeare.txt"


def train(text: str) -> Tokenizer:
    tok: Tokenizer = Tokenizer.train(text, 400, special_tokens=["<|endoftext|>"], progress=False)
    assert tok.n_vocab == 400
    return tok


def encode_and_decode(tok: Tokenizer) -> None:
    ids: list[int] = tok.encode("To be, or not to be")
    text: str = tok.decode(ids)
    assert text == "To be, or not to be"
    raw: bytes = tok.decode_bytes(ids)
    assert raw == text.encode()
    one: bytes = tok.token_bytes(ids[0])
    assert raw.startswith(one)
    with_special: list[int] = tok.encode("a<|endoftext|>b", allowed_special="all")
    assert tok.special_tokens["<|endoftext|>"] in with_special
    ordinary: list[int] = tok.encode_ordinary("<|endoftext|>")
    assert len(ordinary) > 1
    batch: list[list[int]] = tok.encode_batch(["one", "two"], num_threads=2)
    assert batch == [tok.encode("one"), tok.encode("two")]
    merges: dict[tuple[int, int], int] = tok.merges
    vocab: dict[int, bytes] = tok.vocab
    assert len(vocab) == 256 + len(merges)
    chunks: list[str] = bpe.pretokenize("Hello world", pattern=tok.pattern)
    assert "".join(chunks) == "Hello world"


def numpy_calls(tok: Tokenizer) -> None:
    arr = tok.encode_to_numpy("To be, or not to be")
    assert list(arr) == tok.encode("To be, or not to be")
    ids, offsets = tok.encode_batch_to_numpy(["one", "two"])
    assert len(offsets) == 3 and len(ids) == offsets[-1]
    file_ids, starts = tok.encode_files([CORPUS], separator="<|endoftext|>")
    assert len(starts) == 2 and starts[-1] == len(file_ids) > 0


def streaming(tok: Tokenizer) -> None:
    ids = tok.encode("héllo 🦊")
    dec: StreamDecoder = tok.decoder(errors="replace")
    pieces: list[str] = [dec.feed(i) for i in ids]
    assert "".join(pieces) + dec.flush() == "héllo 🦊"
    strict = tok.decoder(errors="strict")
    assert strict.feed(ids) + strict.flush() == "héllo 🦊"


def budgets(tok: Tokenizer) -> None:
    text = CORPUS.read_text(encoding="utf-8")[:5000]
    head: str = tok.truncate(text, 100)
    assert len(tok.encode(head)) <= 100 and text.startswith(head)
    pieces: list[str] = tok.chunk(text, 256)
    assert "".join(pieces) == text
    overlapping: list[str] = tok.chunk(text, 256, overlap=32)
    assert overlapping[0] == pieces[0]


def files(tok: Tokenizer, directory: Path) -> None:
    tok.save(directory / "tok.bpe")
    assert Tokenizer.load(directory / "tok.bpe") == tok
    tok.save_huggingface(directory / "tokenizer.json")
    assert Tokenizer.from_huggingface(directory / "tokenizer.json") == tok
    written: tuple[str, ...] = tok.save_pretrained(directory / "hf")
    assert len(written) == 3
    assert Tokenizer.from_pretrained(directory / "hf") == tok
    tok.save_tiktoken(directory / "tok.tiktoken")
    again = Tokenizer.from_tiktoken(str(directory / "tok.tiktoken"), pattern=tok.pattern,
                                    special_tokens=tok.special_tokens)
    assert again.encode("To be") == tok.encode("To be")
    assert pickle.loads(pickle.dumps(tok)) == tok
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        pass
    else:
        assert tok.to_tiktoken().encode("To be") == tok.encode("To be")
    try:
        Tokenizer.load(directory / "missing.bpe")
    except TokenizerFileError as e:
        assert "no such file" in str(e)


def counting(directory: Path) -> None:
    counts: Counts = bpe.count(CORPUS, pattern="gpt4")
    assert len(counts) > 0 and counts.total() > 0
    sizes: tuple[int, int] = counts.save(directory / "c.bpec")
    assert sizes[0] == len(counts)
    loaded = Counts.load(directory / "c.bpec")
    merged = Counts.merge(counts, loaded)
    assert merged.total() == 2 * counts.total()
    tok = Tokenizer.train_from_counts(directory / "c.bpec", 300, special_tokens=())
    assert tok.n_vocab == 300


def pipeline(tok: Tokenizer, text: str) -> None:
    n: int = tok.count("To be, or not to be")
    assert n == len(tok.encode("To be, or not to be"))
    ids, starts = tok.encode_with_offsets("héllo 🦊", unit="bytes")
    assert len(ids) == len(starts) and list(ids) == tok.encode("héllo 🦊")
    dropped: list[int] = tok.encode("To be, or not to be", dropout=0.1, seed=7)
    assert tok.decode(dropped) == "To be, or not to be"
    small: Tokenizer = tok.shrink(300)
    assert small.n_vocab == 300
    sizes: list[Tokenizer] = Tokenizer.train(text, [300, 350], progress=False)
    assert [t.n_vocab for t in sizes] == [300, 350]
    more: Tokenizer = Tokenizer.train(text, 450, base=tok, progress=False)
    assert more.n_vocab == 450 and all(more.merges[pair] == new for pair, new in tok.merges.items())
    fim: Tokenizer = tok.with_special_tokens(["<|fim|>"])
    assert "<|fim|>" in fim.special_tokens


def cache(tok: Tokenizer) -> None:
    tok.set_cache_size("8M")
    info = tok.cache_info()
    assert isinstance(info, dict)
    tok.clear_cache()


def main() -> None:
    text = CORPUS.read_text(encoding="utf-8")[:100_000]
    tok = train(text)
    encode_and_decode(tok)
    pipeline(tok, text)
    streaming(tok)
    budgets(tok)
    cache(tok)
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    else:
        numpy_calls(tok)
    with tempfile.TemporaryDirectory() as d:
        files(tok, Path(d))
        counting(Path(d))
    assert bpe.resolve_pattern("gpt4") == bpe.GPT4_PATTERN
    print(f"typed_api: ok ({os.path.basename(__file__)})")


if __name__ == "__main__":
    main()
