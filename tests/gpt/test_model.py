"""The GPT (bpe/gpt/model.py) and `bpe gpt train/sample` (bpe/gpt/train.py,
bpe/gpt/sampling.py), on CPU.

Tiny models (2 layers, 32 wide) keep this file fast; what is tested is the
machinery: causality, that the model can learn, exact resumption, sampling.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bpe
from bpe import data as bdata
from bpe.gpt import train as gpt_train
from bpe.cli import main

try:
    import numpy  # noqa: F401
    import torch
except ImportError:  # pragma: no cover - CI installs the model extra
    if os.environ.get("CI"):
        raise
    pytest.skip("torch/numpy are not installed (pip install -e '.[model]')", allow_module_level=True)

from bpe.gpt.model import GPT, GPTConfig, generate_text, padded_vocab_size, stream_text

SHAKESPEARE = Path(__file__).resolve().parents[2] / "corpora" / "tinyshakespeare.txt"
TINY = dict(n_layer=2, n_head=2, n_embd=32)


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tok.bpe"
    text = SHAKESPEARE.read_text(encoding="utf-8")[:100_000]
    bpe.Tokenizer.train(text, 300, progress=False).save(path)
    return path


@pytest.fixture(scope="module")
def tok(tok_path) -> bpe.Tokenizer:
    return bpe.Tokenizer.load(tok_path)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, tok_path) -> Path:
    directory = tmp_path_factory.mktemp("data") / "ds"
    src = directory.parent / "small.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:60_000], encoding="utf-8")
    bdata.write_dataset([src], tok_path, directory, progress=False)
    return directory


# -- the model ---------------------------------------------------------------


def test_vocab_is_padded_to_a_multiple_of_64():
    assert [padded_vocab_size(n) for n in (1, 64, 65, 300, 50257)] == [64, 64, 128, 320, 50304]
    model = GPT(GPTConfig(n_vocab=300, block_size=16, **TINY))
    assert model.tok_emb.weight.shape == (320, 32)
    assert model.lm_head.weight is model.tok_emb.weight  # tied


def test_forward_shapes_and_initial_loss():
    cfg = GPTConfig(n_vocab=300, block_size=16, **TINY)
    model = GPT(cfg)
    x = torch.randint(0, 300, (3, 16))
    logits, loss = model(x)
    assert logits.shape == (3, 16, 320) and loss is None
    _, loss = model(x, torch.randint(0, 300, (3, 16)))
    assert loss.shape == ()
    # Small initial weights: every token about equally likely.
    assert abs(loss.item() - math.log(320)) < 0.1
    with pytest.raises(ValueError, match="longer than block_size 16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_config_checks():
    with pytest.raises(ValueError, match="multiple of n_head"):
        GPTConfig(n_vocab=300, n_head=3, n_embd=32)


def test_causal_mask_holds():
    """Changing tokens at positions >= t never changes the logits before t."""
    model = GPT(GPTConfig(n_vocab=300, block_size=24, **TINY)).eval()
    x = torch.randint(0, 300, (2, 24))
    with torch.no_grad():
        base, _ = model(x)
        for t in (0, 1, 7, 23):
            y = x.clone()
            y[:, t:] = torch.randint(0, 300, (2, 24 - t))
            changed, _ = model(y)
            torch.testing.assert_close(changed[:, :t], base[:, :t], rtol=0, atol=1e-5)
            if t < 23:  # and the future does matter where it may
                assert not torch.allclose(changed[:, t:], base[:, t:])


def test_overfits_one_batch():
    model = GPT(GPTConfig(n_vocab=300, block_size=16, **TINY))
    x = torch.randint(0, 300, (4, 17))
    x, y = x[:, :-1], x[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    _, first = model(x, y)
    for _ in range(300):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.1 * first.item():
            break
    assert loss.item() < 0.1 * first.item(), (first.item(), loss.item())


def test_generate_shapes_and_options():
    model = GPT(GPTConfig(n_vocab=300, block_size=8, **TINY))
    idx = torch.randint(0, 300, (2, 3))
    out = model.generate(idx, 20, generator=torch.Generator().manual_seed(1))  # longer than block_size
    assert out.shape == (2, 23) and torch.equal(out[:, :3], idx)
    assert out.max() < 300  # padding ids (300..319) are never sampled
    again = model.generate(idx, 20, generator=torch.Generator().manual_seed(1))
    assert torch.equal(out, again)
    greedy = model.generate(idx, 5, temperature=0)
    assert torch.equal(greedy, model.generate(idx, 5, temperature=0))
    # top_k=1 is greedy too.
    assert torch.equal(model.generate(idx, 5, top_k=1), greedy)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(idx, 1, top_k=0)


def test_generate_text_is_a_str_when_a_token_ends_mid_character(tok):
    """A model that always picks the byte 0xE4 (the first of the three bytes of
    '中') ends in the middle of a character; the text still decodes."""
    model = GPT(GPTConfig(n_vocab=tok.n_vocab, block_size=16, **TINY))

    def always_e4(idx, targets=None, cache=None):
        logits = torch.zeros(idx.shape[0], idx.shape[1], model.cfg.vocab_size)
        logits[:, :, 0xE4] = 100.0
        return logits, None

    model.forward = always_e4
    text = generate_text(model, tok, "ROMEO:", 3, temperature=1.0)
    assert isinstance(text, str)
    assert text.startswith("ROMEO:") and text.endswith("\ufffd")
    assert tok.decode_bytes(tok.encode("ROMEO:")) + b"\xe4" * 3 == text[:6].encode() + b"\xe4" * 3
    # An empty prompt starts from <|endoftext|>, which is not part of the text.
    assert generate_text(model, tok, "", 2) == "\ufffd\ufffd"


def test_stream_text_yields_whole_characters(tok):
    """A model that spells "中文!" byte by byte: the stream yields each
    character once its last byte is sampled, never a U+FFFD, and the pieces
    join to generate_text's text."""
    model = GPT(GPTConfig(n_vocab=tok.n_vocab, block_size=16, **TINY))
    spelled = list("中文!".encode())
    start = len(tok.encode("ROMEO:"))

    def spell(idx, targets=None, cache=None):
        logits = torch.zeros(idx.shape[0], idx.shape[1], model.cfg.vocab_size)
        logits[:, :, spelled[(idx.shape[1] - start) % len(spelled)]] = 100.0
        return logits, None

    model.forward = spell
    pieces = list(stream_text(model, tok, "ROMEO:", len(spelled), temperature=0))
    assert pieces == ["ROMEO:", "中", "文", "!"]
    assert generate_text(model, tok, "ROMEO:", len(spelled), temperature=0) == "ROMEO:中文!"
    # Stopped mid-character: the tail comes out as U+FFFD, once, at the end.
    assert list(stream_text(model, tok, "ROMEO:", 2, temperature=0)) == ["ROMEO:", "\ufffd"]


def test_sample_ids_is_generate_step_by_step(tok):
    model = GPT(GPTConfig(n_vocab=tok.n_vocab, block_size=16, **TINY))
    idx = torch.tensor([tok.encode("ROMEO:")])
    g = torch.Generator().manual_seed(5)
    steps = torch.cat([idx, *model.sample_ids(idx, 6, generator=g)], dim=1)
    assert torch.equal(steps, model.generate(idx, 6, generator=torch.Generator().manual_seed(5)))
    assert torch.is_grad_enabled()  # the generator's no_grad does not leak out


def test_kv_cache_gives_the_logits_and_samples_of_the_whole_context():
    """The cache runs only the new positions; its logits are those of the
    whole context (a prompt, then one token at a time, then a chunk of
    several), and the samples for a seed are the same with and without it,
    within block_size and past it (where the window slides)."""
    from bpe.gpt.model import KVCache

    model = GPT(GPTConfig(n_vocab=300, block_size=16, **TINY)).eval()
    x = torch.randint(0, 300, (2, 16))
    with torch.no_grad():
        whole, _ = model(x)  # (2, 16, V)
        kv = KVCache(model.cfg)
        parts = [model(x[:, :5], cache=kv)[0]]  # the prompt
        parts += [model(x[:, t : t + 1], cache=kv)[0] for t in range(5, 9)]  # one at a time
        parts.append(model(x[:, 9:16], cache=kv)[0])  # then 7 at once, after 9 cached
    assert kv.pos == 16
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="longer than block_size"):
        model(x[:, :1], cache=kv)
    idx = x[:, :4]
    for n in (12, 30):  # fills the context exactly; goes past it
        with_cache = model.generate(idx, n, generator=torch.Generator().manual_seed(7))
        without = model.generate(idx, n, generator=torch.Generator().manual_seed(7), cache=False)
        assert torch.equal(with_cache, without)


# -- training ---------------------------------------------------------------------


def train(dataset, tok_path, out, **settings):
    """The library's train() with a tiny model (settings override these)."""
    tiny = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4, warmup=2, eval_interval=3,
                eval_iters=2, log_interval=1, device="cpu")
    return gpt_train.train(dataset, tok_path, out, **{**tiny, **settings})


def test_learning_rate_schedule():
    lr = lambda s: gpt_train.learning_rate(s, lr=1.0, min_lr=0.1, warmup=10, steps=110)
    assert lr(0) == pytest.approx(0.1) and lr(9) == pytest.approx(1.0)
    assert lr(10) == pytest.approx(1.0)
    assert lr(60) == pytest.approx(0.55, abs=0.01)  # half-way down the cosine
    assert lr(109) == pytest.approx(0.1)
    assert all(lr(s) >= lr(s + 1) for s in range(10, 109))


def test_resume_continues_identically(tmp_path, dataset, tok_path):
    """6 steps in one run == 3 steps, a checkpoint, and 3 more after --resume:
    same weights, optimizer state and batch generator, bit for bit."""
    logs = []
    whole = tmp_path / "whole.pt"
    train(dataset, tok_path, whole, steps=6, log=logs.append)
    part = tmp_path / "part.pt"
    train(dataset, tok_path, part, steps=6, stop_after=3, log=logs.append)
    assert torch.load(part, weights_only=True)["step"] == 3
    train(dataset, tok_path, part, steps=6, resume=True, log=logs.append)

    a, b = torch.load(whole, weights_only=True), torch.load(part, weights_only=True)
    assert a["step"] == b["step"] == 6
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    assert torch.equal(a["generator"], b["generator"])
    assert a["val_loss"] == b["val_loss"]
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert torch.equal(sa["exp_avg"], sb["exp_avg"])
    assert any("resuming" in line for line in logs)


def test_training_lowers_the_loss_and_reports_bits_per_byte(tmp_path, dataset, tok_path):
    logs = []
    out = tmp_path / "g.pt"
    result = train(dataset, tok_path, out, steps=60, lr=3e-3, eval_interval=60, log=logs.append)
    text = "\n".join(logs)
    assert "unigram baseline" in text and "bits/byte" in text and "tokens/s" in text
    # 60 steps of a tiny model get well below the uniform ln(320) = 5.77.
    assert result["val_loss"] < 5.0
    ckpt = torch.load(out, weights_only=True)
    meta = bdata.load_meta(dataset)
    assert ckpt["val_bits_per_byte"] == pytest.approx(bdata.bits_per_byte(ckpt["val_loss"], meta))
    assert [p.name for p in tmp_path.iterdir()] == ["g.pt"]  # no temporary files left


# -- the command line -------------------------------------------------------------------


def run_cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpe", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONUTF8="1"))


def test_cli_end_to_end(tmp_path, tok_path, tok, capsys):
    """encode -> gpt train -> gpt sample, as a user types them. (Training runs
    in this process: each child process pays seconds to import torch.)"""
    src = tmp_path / "small.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:40_000], encoding="utf-8")
    r = run_cli("encode", src, "-t", tok_path, "--out", tmp_path / "ds", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "train.bin" in r.stderr
    code = main(["gpt", "train", "--data", str(tmp_path / "ds"), "-t", str(tok_path), "--out", str(tmp_path / "g.pt"),
                 "--steps", "4", "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "32",
                 "--batch-size", "2", "--eval-interval", "2", "--eval-iters", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "bits/byte" in out and "tokens/s" in out
    sample = ["gpt", "sample", "--ckpt", tmp_path / "g.pt", "--prompt", "ROMEO:", "--tokens", "20", "--seed", "3"]
    r = run_cli(*sample, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ROMEO:") and len(r.stdout) > len("ROMEO:\n")
    assert main(list(map(str, sample))) == 0
    assert capsys.readouterr().out == r.stdout  # --seed makes it reproducible
    assert main([*map(str, sample), "--no-cache"]) == 0
    assert capsys.readouterr().out == r.stdout  # the KV cache changes the speed, not the sample


def one_error_line(code: int, capsys) -> str:
    captured = capsys.readouterr()
    assert code == 1, captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe: error: "), captured.err
    return lines[0]


def test_cli_errors(tmp_path, dataset, tok_path, capsys):
    common = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16", "--device", "cpu"]
    other_tok = tmp_path / "other.bpe"
    bpe.Tokenizer.train("some other text\n" * 100, 260, progress=False).save(other_tok)
    err = one_error_line(main(["gpt", "train", "--data", str(dataset), "-t", str(other_tok), *common]), capsys)
    assert "another tokenizer" in err and "bpe encode" in err

    err = one_error_line(main(["gpt", "train", "--data", str(tmp_path), "-t", str(tok_path), *common]), capsys)
    assert "not a dataset" in err and "bpe encode" in err

    out = tmp_path / "g.pt"
    err = one_error_line(main(["gpt", "train", "--data", str(dataset), "-t", str(tok_path), "--out", str(out),
                               "--resume", *common]), capsys)
    assert "drop --resume" in err

    assert main(["gpt", "train", "--data", str(dataset), "-t", str(tok_path), "--out", str(out), "--steps", "1",
                 "--eval-iters", "1", *common]) == 0
    capsys.readouterr()
    err = one_error_line(main(["gpt", "train", "--data", str(dataset), "-t", str(tok_path), "--out", str(out),
                               "--resume", "--steps", "2", "--n-embd", "64"]), capsys)
    assert "n_embd=64 differs" in err

    err = one_error_line(main(["gpt", "train", "--data", str(dataset), "-t", str(tok_path), "--n-head", "3",
                               "--n-embd", "32", "--out", str(tmp_path / "x.pt")]), capsys)
    assert "multiple of n_head" in err

    err = one_error_line(main(["gpt", "sample", "--ckpt", str(tok_path)]), capsys)
    assert "not a checkpoint" in err
    err = one_error_line(main(["gpt", "sample", "--ckpt", str(tmp_path / "missing.pt")]), capsys)
    assert "missing.pt" in err
    with pytest.raises(SystemExit) as exit_:  # a command line that cannot be understood: argparse's status 2
        main(["gpt", "train", "--data", str(dataset), "-t", str(tok_path), "--steps", "0"])
    assert exit_.value.code == 2 and "argument --steps" in capsys.readouterr().err
