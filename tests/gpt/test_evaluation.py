"""Bits per byte (bpe/gpt/evaluation.py): the windows score every token once,
the figure is the direct computation from the model's logits, a byte-level
model's bits per byte is its loss in bits per token, and evaluation-only
from a checkpoint (`bpe gpt eval`)."""

from __future__ import annotations

import math

import pytest

import bpe
from bpe import data as bdata
from bpe.gpt.evaluation import bits_per_byte, encode_documents, evaluate, token_byte_lengths, windows
from helpers import SHAKESPEARE

torch = pytest.importorskip("torch", reason="the GPT needs torch (pip install 'bpe[model]')")
F = torch.nn.functional

from bpe.gpt.model import GPT, GPTConfig  # noqa: E402

TINY = dict(n_layer=2, n_head=2, n_embd=32)
TEXT = SHAKESPEARE.read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run many small ops: one thread is faster (and is not
    slowed by whatever else runs on the machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tok() -> bpe.Tokenizer:
    return bpe.Tokenizer.train(TEXT[:100_000], 300, progress=False)


def model_for(n_vocab: int, block_size: int, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(n_vocab=n_vocab, block_size=block_size, **TINY)).eval()


# -- windows -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 16, 17, 18, 100, 257])
@pytest.mark.parametrize("T,stride", [(16, None), (16, 16), (16, 5), (16, 1), (1, None)])
def test_windows_score_every_target_once(n, T, stride):
    scored = []
    for k, (a, b, first) in enumerate(windows(n, T, stride)):
        assert 0 <= a < b <= n - 1 and b - a <= T and 0 <= first < b - a
        targets = list(range(a + 1 + first, b + 1))  # ids[a+1:b+1] from index `first` on
        scored += targets
        if k and stride is not None:  # after the first window: at least T - stride tokens of context
            assert min(t - a for t in targets) >= T - stride + 1
    assert scored == list(range(1, n))


def test_windows_reject_a_bad_stride():
    with pytest.raises(ValueError, match="stride must be between 1 and block_size"):
        windows(10, 4, 5)


# -- bits per byte, directly -----------------------------------------------------------


def direct_bits_per_byte(model, ids, lengths, contexts) -> float:
    """From the logits, target by target: -log p(ids[t] | ids[contexts(t):t])
    summed over ordinary targets, over ln 2 times their bytes."""
    nats, n_bytes = 0.0, 0
    with torch.no_grad():
        for t in range(1, len(ids)):
            if lengths[ids[t]] == 0:
                continue
            x = torch.tensor([ids[contexts(t) : t]])
            logits, _ = model(x)
            nats -= F.log_softmax(logits[0, -1].double(), dim=-1)[ids[t]].item()
            n_bytes += int(lengths[ids[t]])
    return nats / (math.log(2) * n_bytes)


def test_bits_per_byte_is_the_direct_computation(tok):
    """Two documents (so an <|endoftext|> target inside): non-overlapping
    windows (each target's context: its window's earlier tokens; the last
    window reads the block_size tokens before the end), and a sliding
    window (stride 1: the block_size tokens before each target)."""
    docs = [TEXT[:500], TEXT[5000:5210] + "<|endoftext|> is text here"]
    ids = encode_documents(tok, docs).tolist()
    eot = tok.special_tokens["<|endoftext|>"]
    assert ids[0] == eot and ids.count(eot) == 2  # the literal "<|endoftext|>" is ordinary text
    lengths = token_byte_lengths(tok)
    assert lengths[eot] == 0 and lengths[:256].tolist() == [1] * 256
    T = 16
    model = model_for(tok.n_vocab, T)
    got = bits_per_byte(model, ids, lengths)
    assert got["bytes"] == sum(len(d.encode()) for d in docs)  # the text's UTF-8 bytes, the specials left out
    assert got["tokens"] == len(ids) - 2
    assert got["windows"] == math.ceil((len(ids) - 1) / T)
    whole = (len(ids) - 1) // T * T  # targets 1..whole are in whole windows; the rest in the last one
    assert (len(ids) - 1) % T  # (this text has such a rest)
    context = lambda t: (t - 1) // T * T if t <= whole else len(ids) - 1 - T  # noqa: E731
    assert got["bits_per_byte"] == pytest.approx(direct_bits_per_byte(model, ids, lengths, context), rel=1e-6)
    slide = bits_per_byte(model, ids, lengths, stride=1, batch_size=7)
    assert slide["bytes"] == got["bytes"]
    assert slide["bits_per_byte"] == pytest.approx(direct_bits_per_byte(model, ids, lengths, lambda t: max(0, t - T)),
                                                   rel=1e-6)
    # Batching does not change the figure.
    assert bits_per_byte(model, ids, lengths, batch_size=1)["bits_per_byte"] == pytest.approx(got["bits_per_byte"],
                                                                                              rel=1e-6)


def test_a_byte_model_gives_its_loss_in_bits_per_token():
    """Bytes as tokens (the 256-token vocabulary): bits per byte is the
    model's own mean loss (its forward's cross-entropy) in bits per token."""
    tok = bpe.Tokenizer(())  # no merges, no special tokens: ids are bytes
    assert tok.n_vocab == 256
    T = 32
    data = TEXT.encode()[: 10 * T + 1]  # 10 full windows after the first byte
    ids = encode_documents(tok, [data]).tolist()
    assert ids == list(data)
    model = model_for(256, T)
    xy = torch.tensor(ids).view(1, -1)
    with torch.no_grad():
        losses = [model(xy[:, k * T : (k + 1) * T], xy[:, k * T + 1 : (k + 1) * T + 1])[1].item() for k in range(10)]
    got = bits_per_byte(model, ids, token_byte_lengths(tok))
    assert got["bytes"] == len(data) - 1  # no <|endoftext|>: the first byte has no context and is not scored
    assert got["bits_per_byte"] == pytest.approx(sum(losses) / 10 / math.log(2), rel=1e-5)
    assert got["bits_per_byte"] == pytest.approx(got["bits_per_token"], rel=1e-12)


def test_with_endoftext_every_byte_is_scored():
    tok = bpe.Tokenizer((), special_tokens={"<|endoftext|>": 256})
    docs = ["héllo wörld\n" * 20, "中文 text"]
    ids = encode_documents(tok, docs)
    got = bits_per_byte(model_for(257, 16), ids, token_byte_lengths(tok))
    assert got["bytes"] == got["tokens"] == sum(len(d.encode()) for d in docs)
    assert got["bits_per_byte"] == pytest.approx(got["bits_per_token"], rel=1e-12)


# -- evaluation only, from a checkpoint -------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tok):
    from bpe.gpt.train import train

    d = tmp_path_factory.mktemp("eval")
    tok.save(d / "tok.bpe")
    (d / "small.txt").write_text(TEXT[:30_000], encoding="utf-8")
    bdata.write_dataset([d / "small.txt"], d / "tok.bpe", d / "ds", progress=False)
    train(d / "ds", d / "tok.bpe", d / "g.pt", steps=3, block_size=16, batch_size=2, eval_iters=1, device="cpu",
          log=lambda _: None, **TINY)
    return d


def test_evaluate_a_checkpoint_on_files_and_on_a_dataset(checkpoint, tok, capsys):
    from bpe.cli import main

    d = checkpoint
    (d / "held.txt").write_text(TEXT[50_000:52_000], encoding="utf-8")
    r = evaluate(d / "g.pt", [d / "held.txt"], device="cpu")
    assert r["bytes"] == len(TEXT[50_000:52_000].encode()) and 0 < r["bits_per_byte"] < 16
    assert main(["gpt", "eval", "--ckpt", str(d / "g.pt"), str(d / "held.txt"), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.startswith(f"{r['bits_per_byte']:.4f} bits/byte")
    on_val = evaluate(d / "g.pt", data=d / "ds", device="cpu")
    val = bdata.load_split(d / "ds", "val")
    assert on_val["split"] == "val" and on_val["windows"] == math.ceil((len(val) - 1) / 16)
    with pytest.raises(ValueError, match="one of the two"):
        evaluate(d / "g.pt", device="cpu")
    with pytest.raises(SystemExit) as exit_:
        main(["gpt", "eval", "--ckpt", str(d / "g.pt"), "--device", "cpu"])
    assert exit_.value.code == 2 and "FILEs or --data" in capsys.readouterr().err
