"""Safe in every process model a training pipeline uses (rust/threads.rs).

A forked child (DataLoader workers, ``multiprocessing``'s fork method,
``datasets.map``) has only the thread that forked: the parent's thread pools
and any lock another thread held are copies with no thread behind them.
Every call must still work in the child, with the parent's ids. Each
scenario runs in a fresh interpreter (tests/reliability/processes_script.py) under a
hard timeout, so a regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import default_sigint

SCRIPT = Path(__file__).resolve().parent / "processes_script.py"


def scenario(name: str, tmp_path, timeout: float = 300) -> dict:
    """Runs a scenario; its last line of output is its JSON report."""
    try:
        done = subprocess.run([sys.executable, str(SCRIPT), name, str(tmp_path)], capture_output=True, text=True,
                              timeout=timeout, cwd=tmp_path)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} hung (no end after {timeout} s); its output: {e.stdout!r} {e.stderr!r}")
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_call_works_in_a_forked_child_after_the_parent_used_it(tmp_path):
    report = scenario("every_call", tmp_path)
    assert len(report) >= 30
    bad = {name: outcome for name, outcome in report.items() if outcome != "ok"}
    assert not bad, bad


def test_a_fork_while_other_threads_are_inside_the_core_leaves_the_child_working(tmp_path):
    report = scenario("fork_while_busy", tmp_path)
    assert report["forks"] == 24
    assert not report["bad"], report["bad"]


def test_eight_threads_share_one_tokenizer_while_the_cache_is_changed(tmp_path):
    report = scenario("threads_at_once", tmp_path)
    assert report == {"finished": 8, "bad": []}


def test_multiprocessing_pools_with_every_start_method(tmp_path):
    report = scenario("pools", tmp_path)
    assert report == {"Pool fork": "ok", "Pool forkserver": "ok", "Pool spawn": "ok",
                      "ProcessPoolExecutor fork": "ok", "ProcessPoolExecutor default": "ok"}


def test_torch_dataloader_workers_encode_after_the_parent_did(tmp_path):
    pytest.importorskip("torch", reason="the model extra (torch) is not installed")
    report = scenario("dataloader", tmp_path)
    assert report == {"start method": "fork", "same": True, "n": 40}


def test_datasets_map_with_two_processes(tmp_path):
    if importlib.util.find_spec("datasets") is None:
        pytest.skip("HF datasets is not installed (it is in the test extra)")
    assert scenario("datasets_map", tmp_path) == {"same": True}


def test_ctrl_c_stops_a_pool_of_forked_workers_busy_in_the_core(tmp_path):
    """SIGINT to the process group, as a terminal's Ctrl-C: the parent and
    both workers (each inside encode_batch) are gone within seconds."""
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "ctrl_c_pool", str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, preexec_fn=default_sigint,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.killpg(proc.pid, signal.SIGINT)
        start = time.monotonic()
        proc.wait(timeout=30)
        # The workers too: nothing of the group is left.
        while time.monotonic() - start < 30:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("a worker of the pool outlived Ctrl-C by 30 s")
        assert time.monotonic() - start < 10, f"the pool took {time.monotonic() - start:.1f} s to stop"
        assert proc.returncode != 0
        assert "KeyboardInterrupt" in proc.stderr.read()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
