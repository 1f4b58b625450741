"""`bpe gpt compare` (bpe/gpt/comparison.py): the fair budget, the reported
figures, seeds, determinism on the CPU, the command line (table, JSON,
plot), and Ctrl-C, which still reports what was evaluated."""

from __future__ import annotations

import json
import math
import queue
import signal
import subprocess
import sys
import threading

import pytest

import bpe
from bpe.cli import main
from bpe.gpt import compare
from bpe.gpt.evaluation import token_byte_lengths
from conftest import default_sigint
from helpers import SHAKESPEARE

torch = pytest.importorskip("torch", reason="the GPT needs torch (pip install 'bpe[model]')")

TINY = dict(n_layer=1, n_head=2, n_embd=32, block_size=32, batch_size=4)
TINY_ARGS = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "32", "--batch-size", "4",
             "--threads", "1"]
TEXT = SHAKESPEARE.read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is faster, and not slowed by a busy machine
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    (d / "data.txt").write_text(TEXT[:40_000], encoding="utf-8")
    bpe.Tokenizer.train(TEXT[100_000:300_000], 300, progress=False).save(d / "bpe300.bpe")
    return d


def run(files, **options):
    settings = dict(budget=16_000, evals=2, device="cpu", progress=False, **TINY)
    return compare(["bytes", files / "bpe300.bpe"], files / "data.txt", **{**settings, **options})


def test_the_budget_is_fair_and_the_figures_add_up(files):
    result = run(files, seeds=2)
    s = result["settings"]
    assert not result["interrupted"] and [r["tokenizer"] for r in result["rows"]] == ["bytes", "bpe300.bpe"]
    # The held-out text: the last tenth of the file, from a line start, not trained on.
    data = (files / "data.txt").read_bytes()
    cut = data.find(b"\n", int(len(data) * 0.9)) + 1
    assert s["train_text_bytes"] == cut and s["eval_text_bytes"] == len(data) - cut
    toks = {"bytes": bpe.Tokenizer((), special_tokens={"<|endoftext|>": 256}),
            "bpe300.bpe": bpe.Tokenizer.load(files / "bpe300.bpe")}
    B, T = TINY["batch_size"], TINY["block_size"]
    non_embedding = {r["non_embedding_params"] for r in result["rows"]}
    assert len(non_embedding) == 1  # the same model body for every vocabulary
    for row in result["rows"]:
        tok = toks[row["tokenizer"]]
        train_tokens = 1 + len(tok.encode(data[:cut].decode(), disallowed_special=()))  # after <|endoftext|>
        steps = math.ceil(16_000 / (B * T * (cut / train_tokens)))
        assert row["steps"] == steps and row["train_tokens"] == steps * B * T
        assert abs(row["train_bytes"] - 16_000) < 0.15 * 16_000  # random windows: about the budget
        vpad = -(-tok.n_vocab // 64) * 64
        assert row["embedding_params"] == vpad * 32 + T * 32
        assert row["flops"] == row["train_tokens"] * (6 * (row["non_embedding_params"] + vpad * 32) + 12 * 1 * 32 * T)
        held = data[cut:].decode()
        assert row["bytes_per_token"] == pytest.approx(len(held.encode()) / len(tok.encode(held, disallowed_special=())))
        assert 0 < row["renyi_efficiency"] < 1 and row["tokens_per_word"] > 1
        # Two seeds: the mean and the sample standard deviation of the two runs.
        a, b = row["bits_per_byte_runs"]
        assert row["seeds"] == [1337, 1338] and a != b
        assert row["bits_per_byte"] == pytest.approx((a + b) / 2)
        assert row["bits_per_byte_std"] == pytest.approx(abs(a - b) / math.sqrt(2))
        assert 1 < row["bits_per_byte"] < 9 and row["complete"]
    runs = result["runs"]
    assert len(runs) == 4 and all(len(r["curve"]) == 2 and r["curve"][-1]["step"] == r["steps"] for r in runs)
    assert all(r["curve"][0]["bytes"] < r["curve"][1]["bytes"] == r["bytes"] for r in runs)


def test_runs_are_deterministic_on_the_cpu(files):
    a, b = run(files, evals=1), run(files, evals=1)
    for ra, rb in zip(a["runs"], b["runs"]):
        assert ra["curve"] == rb["curve"]  # bits per byte, training loss and bytes seen, bit for bit
    c = run(files, evals=1, seed=7)
    assert c["runs"][0]["curve"] != a["runs"][0]["curve"]


def test_bad_arguments_say_what_to_do(files):
    with pytest.raises(ValueError, match="two tokenizers are named bytes"):
        compare(["bytes", "bytes"], files / "data.txt", budget="1K", device="cpu")
    with pytest.raises(TypeError, match="a tokenizer is"):
        compare([3], files / "data.txt", budget="1K", device="cpu")
    with pytest.raises(ValueError, match="budget '1 lot' is not a size"):
        compare(["bytes"], files / "data.txt", budget="1 lot", device="cpu")
    with pytest.raises(ValueError, match="multiple of n_head"):
        compare(["bytes"], files / "data.txt", budget="1K", n_head=3, device="cpu")
    with pytest.raises(ValueError, match="fewer than block_size"):
        compare(["bytes"], files / "data.txt", budget="1K", limit=600, block_size=1024, device="cpu", progress=False)
    with pytest.raises(FileNotFoundError):
        compare(["bytes"], files / "missing.txt", budget="1K", device="cpu")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        compare(["bytes"], files / "data.txt", budget="1K", device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="PyTorch sees no CUDA GPU; use cpu"):
            compare(["bytes"], files / "data.txt", budget="1K", device="cuda")


def test_a_dict_names_the_tokenizers_and_eval_files_are_held_out(files, tmp_path, capsys):
    """(With the progress bar forced on: its line shows the step, the bytes
    seen and the loss.)"""
    held = tmp_path / "held.txt"
    held.write_text(TEXT[200_000:204_000], encoding="utf-8")
    tok = bpe.Tokenizer.load(files / "bpe300.bpe")
    result = compare({"mine": tok}, [files / "data.txt"], eval=held, budget="8K", evals=1, device="cpu",
                     progress=True, **TINY)
    (row,) = result["rows"]
    bar = [line for line in capsys.readouterr().err.split("\r") if line.startswith("mine seed 1337 [")]
    assert bar and f"step {row['steps']}/{row['steps']}, " in bar[-1] and "/8.19 KB, loss " in bar[-1], bar
    assert row["tokenizer"] == "mine" and row["eval_bytes"] == len(held.read_bytes())
    assert result["settings"]["train_text_bytes"] == len((files / "data.txt").read_bytes())
    assert row["eval_tokens"] == len(tok.encode(held.read_text(), disallowed_special=()))
    assert token_byte_lengths(tok)[tok.special_tokens["<|endoftext|>"]] == 0


def test_cli_table_json_plot_and_saved_checkpoints(files, tmp_path, capsys):
    common = ["gpt", "compare", "bytes", str(files / "bpe300.bpe"), "--data", str(files / "data.txt"),
              "--budget", "8K", "--evals", "2", "--device", "cpu", "-q", *TINY_ARGS]
    plot, save = tmp_path / "bpb.png", tmp_path / "ckpts"
    assert main([*common, "--json", "--plot", str(plot), "--save", str(save)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["tokenizer"] for r in out["rows"]] == ["bytes", "bpe300.bpe"] and not out["interrupted"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in save.iterdir()) == ["bpe300.bpe-seed1337.pt", "bytes-seed1337.pt"]
    # The checkpoints carry their tokenizer: evaluation needs nothing else, and agrees.
    from bpe.gpt import evaluate

    again = evaluate(save / "bytes-seed1337.pt", [files / "data.txt"], device="cpu")
    assert again["bytes"] == len((files / "data.txt").read_bytes())
    assert main([*common, "--markdown"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| tokenizer | vocab | bits/byte |") and "| bytes | 257 |" in table
    assert main(common) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["tokenizer", "vocab", "bits/byte"] and lines[1].startswith("bytes ")


def _lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, b""):
        into.put(line.decode("utf-8", "replace"))
    into.put(None)


def test_ctrl_c_stops_cleanly_and_reports_what_was_evaluated(files):
    """A run far too long to finish: after its first evaluation, SIGINT. The
    command stops within seconds, prints the JSON of what was evaluated
    (marked interrupted) and exits with 130."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bpe", "gpt", "compare", "bytes", str(files / "bpe300.bpe"), "--data",
         str(files / "data.txt"), "--budget", "1G", "--evals", "100000", "--device", "cpu", "--json", *TINY_ARGS],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint,
    )
    # One reader per pipe (communicate() would race the stderr reader for lines).
    lines: queue.Queue = queue.Queue()
    stdout: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(child.stderr, lines), daemon=True).start()
    threading.Thread(target=lambda: stdout.put(child.stdout.read()), daemon=True).start()
    try:
        seen = []
        while not any("held-out" in line for line in seen):
            line = lines.get(timeout=120)
            assert line is not None, "".join(seen)
            seen.append(line)
        child.send_signal(signal.SIGINT)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    while (line := lines.get(timeout=30)) is not None:
        seen.append(line)
    out = stdout.get(timeout=30)
    assert child.returncode == 130, "".join(seen)
    result = json.loads(out)
    assert result["interrupted"] and [r["tokenizer"] for r in result["rows"]] == ["bytes"]
    (row,) = result["rows"]
    assert not row["complete"] and row["steps"] < result["runs"][0]["steps"]
    assert len(result["runs"][0]["curve"]) >= 1 and math.isfinite(row["bits_per_byte"])
    assert any("interrupted at step" in line for line in seen) and seen[-1].strip() == "bpe: interrupted", seen
    assert "Traceback" not in "".join(seen)


@pytest.mark.parametrize("missing,extra,error", [
    ("torch", [], "the GPT needs PyTorch and numpy: pip install 'bpe[model]' (or: pip install torch numpy)"),
    ("matplotlib", ["--plot", "never.png"], "the plot needs matplotlib: pip install 'bpe[plot]'"),
])
def test_a_missing_extra_is_one_line_saying_how_to_install_it(files, tmp_path, missing, extra, error):
    """Before any training: a run of minutes must not fail at its end."""
    argv = ["gpt", "compare", "bytes", "--data", str(files / "data.txt"), "--budget", "1G", *extra]
    code = f"import sys; sys.modules[{missing!r}] = None\nfrom bpe.cli import main\nsys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"bpe: error: {error}"]
    assert not (tmp_path / "never.png").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (this machine has none)")
@pytest.mark.timeout(600)
def test_cuda_under_bf16_autocast_agrees_with_cpu(files):
    """On a GPU the same seed trains under bf16 autocast: the figures that do
    not depend on arithmetic (steps, tokens, bytes) equal the CPU run's, and
    bits per byte lands close to it (bf16 rounds differently, so not equal)."""
    cpu, cuda = run(files, device="cpu"), run(files, device="cuda")
    assert cuda["settings"]["device"].startswith("cuda")
    for a, b in zip(cpu["rows"], cuda["rows"]):
        assert (a["steps"], a["train_tokens"], a["train_bytes"]) == (b["steps"], b["train_tokens"], b["train_bytes"])
        assert math.isfinite(b["bits_per_byte"]) and abs(a["bits_per_byte"] - b["bits_per_byte"]) < 0.25
