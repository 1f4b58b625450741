"""Smoke test of the benchmark harness (benchmarks/run.py) on a fresh clone:
one small corpus from corpora/, bpe against tiktoken only, one repeat.
It needs neither ../shared nor any anchor but tiktoken (a test extra), and
runs in about 20 s on 2 cores (the subprocess is stopped at 60 s)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "run.py"

sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import FEEDS, batch_docs, cut_at_newlines, short_strings, split_feed  # noqa: E402


def test_quick_run_writes_expected_rows(tmp_path):
    pytest.importorskip("tiktoken")
    cmd = [
        sys.executable, str(RUN), "--quick", "--corpus", str(ROOT / "corpora" / "tinyshakespeare.txt"),
        "--anchors", "tiktoken", "--repeats", "1", "--vocabs", "2000", "--results", str(tmp_path),
        "--many-threads", "100000",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "### Targets" in p.stdout
    res = json.loads((tmp_path / "latest.json").read_text())

    (train,) = [r for r in res["train"] if r["tool"] == "bpe"]
    assert train["status"] == "ok", train
    assert train["vocab"] == 2000 and train["final_vocab"] == 2000
    for key in ("wall_s", "cpu_s", "cores", "peak_rss_mb"):
        assert train[key] > 0, (key, train)

    enc = res["encode"]["cl100k_base"]
    ours, theirs = enc["bpe"], enc["tiktoken"]
    assert ours["status"] == "ok" and theirs["status"] == "ok", (ours, theirs)
    ref = res["encode_reference"]["cl100k_base"]["tinyshakespeare"]["digest"]
    timed, warmup = res["encode_slices"]["tinyshakespeare"]["timed"], res["encode_slices"]["tinyshakespeare"]["warmup"]
    assert timed[0] == 0 and timed[1] == warmup[0] < warmup[1]  # warm-up text is never the timed text
    for r in (ours, theirs):
        c = r["corpora"]["tinyshakespeare"]
        # One thread: a child per call, pinned to one CPU, warm (after a
        # warm-up on the other slice) and cold, each checked against tiktoken.
        for mode in ("warm", "cold"):
            m = c[mode]["list"]
            assert m["mb_s"] > 0 and m["bytes"] == timed[1] and m["cpus"] == [res["encode_method"]["pin_cpu"]]
            assert m["digest"] == ref
            assert m["warmup_bytes"] == (warmup[1] - warmup[0] if mode == "warm" else 0)
        assert c["decode"]["mb_s"] > 0 and c["batch"]["mb_s"] > 0
        assert c["decode"]["roundtrip"] is True
        assert r["short"]["n"] > 1000
        for meth in ("encode", "encode_ordinary"):
            assert r["short"][meth]["ns_per_call"] > 0
    # Our batch gives the ids of the whole text.
    assert ours["corpora"]["tinyshakespeare"]["batch"]["digest"] == ref
    # Before each timed batch, our cache was emptied and warmed on the
    # warm-up slice (never the timed text); tiktoken keeps no cache.
    assert ours["corpora"]["tinyshakespeare"]["batch"]["warmup_bytes"] == warmup[1] - warmup[0]
    assert ours["corpora"]["tinyshakespeare"]["scaling"]["warmup_bytes"] == warmup[1] - warmup[0]
    assert theirs["corpora"]["tinyshakespeare"]["batch"]["warmup_bytes"] == 0
    assert any(name.startswith("encode cl100k_base one thread") and verdict in ("PASS", "FAIL")
               for verdict, name, _ in res["targets"])
    # encode_files: measured, or a row saying this build lacks it.
    (files,) = [r for r in res["encode_files"]["by_encoding"]["cl100k_base"]["runs"]
                if r["tool"] == "bpe" and r["start"] == "warm"]
    (cold,) = [r for r in res["encode_files"]["by_encoding"]["cl100k_base"]["runs"]
               if r["tool"] == "bpe" and r["start"] == "cold"]
    assert cold["warmup_mode"] == "cold" and files["warmup_mode"] == "warm" and cold["digest"] == files["digest"]
    if files.get("status") == "ok":
        assert files["digest"] == res["encode_files"]["by_encoding"]["cl100k_base"]["reference"]["digest"]
    else:
        assert files["status"] == "unsupported" and "not available in this build" in files["error"]
    # The many-thread row runs only where there are that many cores.
    assert "skipped: this machine has" in p.stdout and res["encode_many"]["skipped"].startswith("this machine has")
    # The batch target is judged on one-thread and batch calls timed in
    # alternation within the round (five pairs).
    import statistics
    c = ours["corpora"]["tinyshakespeare"]
    pairs = c["scaling"]["ratios"]
    assert len(pairs) == 5 and all(x > 0 for x in pairs)
    (q,) = ours["batch_scaling"]["ratios"]
    assert q == pytest.approx(statistics.median(pairs)) == pytest.approx(ours["batch_scaling"]["median"])
    (batch_target,) = [t for t in res["targets"] if t[1].startswith("encode_batch cl100k_base 2 threads")]
    assert batch_target[0] == ("PASS" if q >= 1.8 else "FAIL") and f"{q:.2f}×" in batch_target[2]
    # Beside it, what the machine's two CPUs gave: two copies of the
    # one-thread call at once against one alone.
    ceiling = ours["ceiling"]
    (r,) = ceiling["rounds"]
    assert ceiling["threads"] == 2 and len(r["together_s"]) == 2 and r["alone_s"] > 0
    assert ceiling["median"] == pytest.approx(sum(r["alone_s"] / w for w in r["together_s"]))
    assert f"CPUs gave {ceiling['median']:.2f}× one" in batch_target[2]
    # The chart needs matplotlib (benchmarks/requirements.txt), which the test
    # extra does not install: then no chart is written, and that is all.
    import importlib.util
    chart = tmp_path / "chart.png"
    if importlib.util.find_spec("matplotlib") is not None:
        assert chart.stat().st_size > 0
    else:
        assert not chart.exists()


def test_missing_shared_corpora_exits_2(tmp_path):
    p = subprocess.run([sys.executable, str(RUN), "--shared", str(tmp_path / "nowhere"), "--results", str(tmp_path)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2
    assert "gutenberg100m.txt.xz" in p.stderr and "--corpus" in p.stderr


def test_not_installed_anchor_is_a_row_not_a_crash():
    import run

    rows = run.summarize_train("c", 1, 100, "rustbpe", [], {"status": "not installed"})
    assert run.train_table({"train": [rows]}).count("not installed (pip install -r benchmarks/requirements.txt)") == 1


def test_encode_rounds_report_the_median_round():
    import _harness as run

    def child(wall, n):  # one child's result, shaped like _worker.py's
        return {"status": "ok", "n": n, "c": {"one": {"wall_s": wall, "walls": [wall], "mb_s": 10 / wall},
                                               "batch": {"wall_s": 5 - wall, "walls": [5 - wall]}}}

    merged = run.median_round([child(3.0, 1), child(1.0, 2), child(2.0, 3)])
    # Each measurement is the median round's (its own speed with it), walls from all rounds.
    assert merged["c"]["one"] == {"wall_s": 2.0, "walls": [3.0, 1.0, 2.0], "mb_s": 5.0}
    assert merged["c"]["batch"] == {"wall_s": 3.0, "walls": [2.0, 4.0, 3.0]}
    assert merged["n"] == 1 and merged["status"] == "ok"
    assert run.median_round([child(2.0, 1)]) == child(2.0, 1)


def test_batch_scaling_pairs_the_figures_of_each_round():
    import _encode as run
    from _harness import median_round

    def child(one, batch):  # MB/s of one round's one-thread and batch runs
        return {"status": "ok", "corpora": {"c": {"one": {"wall_s": 10 / one, "mb_s": one},
                                                  "batch": {"wall_s": 10 / batch, "mb_s": batch}}}}

    # A busy first round slows both figures alike; its ratio is still 1.8.
    # Medians taken per figure would pair one=40 with batch=60 (1.5).
    rounds = [child(20, 36), child(40, 76), child(50, 60)]
    scaling = run.paired_scaling(rounds, "c")
    assert scaling["ratios"] == pytest.approx([1.8, 1.9, 1.2])
    assert scaling["median"] == pytest.approx(1.8)
    merged = median_round(rounds)
    assert merged["corpora"]["c"]["batch"]["mb_s"] / merged["corpora"]["c"]["one"]["mb_s"] == pytest.approx(1.5)
    # Rounds with alternations: the median of all their ratios, and each
    # round's median for the table.
    def alternated(*qs):
        return {"corpora": {"c": {"one": {"mb_s": 1.0}, "batch": {"mb_s": 9.0}, "scaling": {"ratios": list(qs)}}}}

    scaling = run.paired_scaling([alternated(1.0, 1.9, 2.0), alternated(1.7, 1.8, 1.75)], "c")
    assert scaling["ratios"] == pytest.approx([1.9, 1.75])
    assert scaling["median"] == pytest.approx(1.775) and scaling["n"] == 6
    # A round whose batch failed gives no ratio; none at all gives None.
    assert run.paired_scaling([{"corpora": {"c": {"one": {"mb_s": 1.0}, "batch": {"error": "x"}}}}], "c") is None


def test_the_machine_ceiling_sums_each_cpus_share(monkeypatch):
    """`machine_ceiling`: per round, the one-thread call alone and as one copy
    per CPU at once; the ceiling is the sum of (alone / alongside), and the
    rounds alternate which is timed first."""
    import argparse
    import os

    import _encode

    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    order = []

    def fake_run_job(job, timeout, env):
        assert job["kind"] == "alongside" and env["RAYON_NUM_THREADS"] == "1"
        (cpu,) = job["cpus"]
        # The driver sends the copies off once every copy is ready.
        ready = os.path.join(job["sync"], f"ready.{cpu}")
        with open(ready + ".tmp", "w") as f:
            f.write("0.01")
        os.replace(ready + ".tmp", ready)
        while not os.path.exists(os.path.join(job["sync"], "go")):
            pass
        order.append(cpu)
        alone = len(os.listdir(job["sync"])) == 2  # ready.<cpu> and go
        return {"status": "ok", "walls": [1.0 if alone else (1.25 if cpu == 0 else 1.0)] * job["calls"]}

    monkeypatch.setattr(_encode, "run_job", fake_run_job)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    by_tool = {"bpe": {"status": "ok"}}
    args = argparse.Namespace(threads=2, repeats=2, timeout=30, pin_cpu=1)
    _encode.machine_ceiling(args, "cl100k_base", {"timed": "t", "warmup": "w"}, {}, by_tool)
    c = by_tool["bpe"]["ceiling"]
    assert c["median"] == pytest.approx(1 / 1.25 + 1) and c["threads"] == 2 and len(c["rounds"]) == 2
    assert order[0] == 1 and sorted(order[1:3]) == [0, 1] and sorted(order[3:5]) == [0, 1] and order[5] == 1
    note = _encode._ceiling_note(by_tool["bpe"])
    assert "2 CPUs gave 1.80× one" in note
    # A copy that fails makes the round an error, not a hang.
    monkeypatch.setattr(_encode, "run_job", lambda job, timeout, env: {"status": "error", "error": "boom"})
    by_tool = {"bpe": {"status": "ok"}}
    _encode.machine_ceiling(args, "cl100k_base", {"timed": "t", "warmup": "w"}, {}, by_tool)
    assert by_tool["bpe"]["ceiling"] == {"error": "error: boom"} and _encode._ceiling_note(by_tool["bpe"]) == ""


def test_one_thread_figures_are_the_best_round():
    import _encode

    rounds = [{"status": "ok", "wall_s": w, "mb_s": 10 / w} for w in (2.0, 1.0, 4.0)] + [{"status": "error", "error": "x"}]
    best = _encode.best_round(rounds)
    assert best["wall_s"] == 1.0 and best["walls"] == [2.0, 1.0, 4.0] and best["rounds_mb_s"] == [5.0, 10.0, 2.5]
    assert "1 round(s) failed" in best["note"]
    assert _encode.best_round([{"status": "unsupported", "error": "no numpy"}]) == {"status": "unsupported",
                                                                                   "error": "no numpy"}


def test_files_rounds_alternate_the_order_of_the_tools(monkeypatch, tmp_path):
    """The encode_files row runs ``--files-repeats`` rounds, the cases in
    reverse order every other round (so that no tool always runs first,
    after the other's process left its mark on the caches), and keeps each
    case's best round with every round's speed."""
    import argparse

    import _encode

    order = []

    def fake_job(job, timeout, env):
        order.append(job["tool"])
        wall = {"bpe": 1.0, "gigatoken": 2.0}[job["tool"]] + len(order) / 100
        return {"status": "ok", "wall_s": wall, "mb_s": 50 / wall, "cores": 2.0}

    monkeypatch.setattr(_encode, "run_job", fake_job)
    monkeypatch.setattr(_encode, "reference_digest", lambda *a: None)
    args = argparse.Namespace(files_repeats=5, timeout=10)
    cases = [("bpe", "files", 2), ("gigatoken", "files", 2)]
    out = _encode.measure_files(args, "cl100k_base", cases, tmp_path / "f.txt", tmp_path / "w.txt", {})
    assert order == ["bpe", "gigatoken", "gigatoken", "bpe"] * 2 + ["bpe", "gigatoken"]
    ours, theirs = out["runs"]
    assert (ours["tool"], theirs["tool"]) == ("bpe", "gigatoken")
    assert len(ours["rounds_mb_s"]) == len(theirs["rounds_mb_s"]) == 5
    assert ours["wall_s"] == 1.01 and theirs["wall_s"] == 2.02  # the best round


def test_warmup_slice_follows_the_timed_slice(tmp_path, monkeypatch):
    import _corpora

    monkeypatch.setenv("BPE_BENCH_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src.txt"
    src.write_bytes(b"".join(b"line %d \xc3\xa9\n" % i for i in range(1000)))
    timed = _corpora.head(src, 1000, "t.txt")
    warm = _corpora.slice_after(src, timed, 1000, "w.txt")
    data = src.read_bytes()
    assert data.startswith(timed.read_bytes() + warm.read_bytes())
    assert timed.read_bytes().endswith(b"\n") and warm.read_bytes().endswith(b"\n")
    assert 900 < len(timed.read_bytes()) <= 1000 and 900 < len(warm.read_bytes()) <= 1000


def test_cjk_slices_split_each_language_in_halves(tmp_path, monkeypatch):
    import _encode

    monkeypatch.setenv("BPE_BENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    flores = tmp_path / "flores.txt"
    parts = []
    for lang, line in (("fra_Latn", "Bonjour."), ("jpn_Jpan", "こんにちは。"), ("kor_Hang", "안녕하세요."),
                       ("zho_Hans", "你好。")):
        parts.append(f"===== FLORES-200 devtest [{lang}] sentences 1-4 =====\n")
        parts += [f"{line} {i}\n" for i in range(4)]
    flores.write_text("".join(parts), encoding="utf-8")
    s = _encode.cjk_slices(flores)
    timed, warm = s["timed"].read_text(encoding="utf-8"), s["warmup"].read_text(encoding="utf-8")
    assert timed == "你好。 0\n你好。 1\nこんにちは。 0\nこんにちは。 1\n안녕하세요. 0\n안녕하세요. 1\n"
    assert warm == "你好。 2\n你好。 3\nこんにちは。 2\nこんにちは。 3\n안녕하세요. 2\n안녕하세요. 3\n"
    assert _encode.corpus_kind(s["name"]) == "CJK"


def test_a_tool_whose_ids_differ_is_never_timed(monkeypatch):
    """The ids are checked before any timing: a tool whose ids differ from
    tiktoken's gets a row saying so and no timed job at all."""
    import argparse

    import _encode

    jobs = []

    def fake_job(job, timeout, env):
        jobs.append(job)
        digest = "wrong" if job["tool"] == "gigatoken" else "d"
        if job.get("check_only"):
            return {"status": "ok", "digest": digest, "n_ids": 3}
        return {"status": "ok", "wall_s": 1.0, "mb_s": 10.0, "digest": digest, "version": "1"}

    monkeypatch.setattr(_encode, "run_job", fake_job)
    monkeypatch.setattr(_encode, "installed", lambda t: True)
    args = argparse.Namespace(repeats=2, timeout=10, pin_cpu=0)
    slices = [{"name": "s", "timed": Path("t.txt"), "warmup": Path("w.txt")}]
    by_tool: dict = {}
    _encode.single_thread(args, "cl100k_base", ["bpe", "gigatoken"], slices, {}, by_tool, {"s": {"digest": "d"}})
    timed = [j for j in jobs if not j.get("check_only")]
    assert timed and all(j["tool"] == "bpe" for j in timed)
    assert [j["tool"] for j in jobs if j.get("check_only")] == ["bpe", "bpe", "gigatoken"]  # list, numpy; numpy
    assert by_tool["gigatoken"]["status"] == "ids differ"
    assert by_tool["bpe"]["corpora"]["s"]["warm"]["numpy"]["mb_s"] == 10.0


def test_encode_targets_take_each_tools_fastest_call():
    import _encode

    def tool(**speeds):  # call -> MB/s, the same on every corpus, warm and cold
        calls = {c: {"mb_s": v, "digest": "d"} for c, v in speeds.items()}
        return {"status": "ok", "corpora": {c: {"warm": calls, "cold": calls} for c in CORPORA}}

    CORPORA = ("gutenberg10m", "code_mix10m", "flores200_10m", "flores200_cjk")

    results = {
        "encode_corpora": list(CORPORA),
        "encode_reference": {"cl100k_base": {c: {"digest": "d"} for c in CORPORA}},
        "encode": {"cl100k_base": {"bpe": tool(list=50.0, numpy=70.0), "gigatoken": tool(numpy=50.0),
                                   "hf1": tool(numpy=45.0),
                                   "fastokens": tool(list=40.0, flat=69.0), "toktok": tool(list=30.0, numpy=71.0)}},
        "encode_files": {"threads": 2, "by_encoding": {"cl100k_base": {"runs": [
            {"tool": "bpe", "mode": "files", "threads": 2, "status": "unsupported",
             "error": "encode_files not available in this build"},
            {"tool": "gigatoken", "mode": "files", "threads": 2, "mb_s": 90.0},
            {"tool": "bpe", "mode": "files", "threads": 2, "start": "cold", "mb_s": 150.0},
            {"tool": "gigatoken", "mode": "files", "threads": 2, "start": "cold", "mb_s": 90.0}]}}},
        "encode_many": {"threads": 16, "skipped": "this machine has 2 cores"},
    }
    verdicts = {name: (v, why) for v, name, why in _encode.targets(results)}
    # Ours is the best of list and numpy (70), an anchor's its fastest call.
    v, why = verdicts["encode cl100k_base one thread ≥ 1.0× gigatoken on every corpus (English, code, multilingual, CJK)"]
    assert v == "PASS" and "flores200_cjk 1.40×" in why  # 70 / 50 on each of the four
    assert verdicts["encode cl100k_base one thread ≥ 1.15× gigatoken on English"][0] == "PASS"
    v, why = verdicts["encode cl100k_base one thread ≥ 1.5× HF tokenizers 1.0 on every corpus"]
    assert v == "PASS" and "1.56×" in why  # 70 / 45
    v, why = verdicts["encode cl100k_base one thread ≥ max(fastokens, toktok-rs) on every corpus"]
    assert v == "FAIL" and "0.99×" in why  # 70 / 71
    assert verdicts["encode cl100k_base one thread, cold (first call) ≥ 1.2× gigatoken"][0] == "PASS"
    assert verdicts["encode cl100k_base: our ids = tiktoken's on every text"][0] == "PASS"
    v, why = verdicts["encode_files cl100k_base 2 threads, 50 MB, warm ≥ 1.2× gigatoken's encode_files"]
    assert v == "SKIP" and "not available in this build" in why
    v, why = verdicts["encode_files cl100k_base 2 threads, 50 MB, cold ≥ 1.5× gigatoken's encode_files"]
    assert v == "PASS" and why.startswith("1.67×")
    assert [v for name, (v, why) in verdicts.items() if name.startswith("16 threads")] == ["SKIP"]
    assert "| cl100k_base | code_mix10m | 50.0 ✓ | 70.0 ✓ | 50.0 ✓ | 45.0 ✓ | 69.0 (flat) ✓ | 71.0 (numpy) ✓ | — | — |" \
        in _encode.wide_table(results, "warm")


def test_pieces_concatenate_to_the_corpus():
    text = (ROOT / "corpora" / "tinyshakespeare.txt").read_text(encoding="utf-8")
    for feed in FEEDS:
        assert "".join(split_feed(text, feed)) == text
    docs = batch_docs(text, 1000)
    assert "".join(docs) == text and 900 <= len(docs) <= 1001
    # Cuts only at a single newline between two non-space characters.
    assert all(d.endswith("\n") and not d[-2].isspace() and not nxt[0].isspace() for d, nxt in zip(docs, docs[1:]))
    assert "".join(cut_at_newlines(text, 10**9)) == text
    s = short_strings(text, n=5000)
    assert len(s) == 5000 and all(0 < len(x.encode()) <= 64 for x in s)
    cut = short_strings("é" * 40, max_bytes=5)
    assert cut == ["éé"]


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "gpt4o"])
def test_safe_cuts_keep_the_split(pattern):
    """Pieces cut by cut_at_newlines split into exactly the chunks of the
    whole text, so the harness may compare their ids with whole-text ids."""
    bpe = pytest.importorskip("bpe")
    text = (ROOT / "corpora" / "tinyshakespeare.txt").read_text(encoding="utf-8")
    text += "a\n\nb \nc\r\nd\n \ne'\ns\n1\n2\n.\n!\n\n\n\u3000\nx\n\u00a0y\n"
    pieces = cut_at_newlines(text, 3_000)
    assert len(pieces) > 100
    chunks = [c for p in pieces for c in bpe.pretokenize(p, pattern)]
    assert chunks == bpe.pretokenize(text, pattern)
