"""Where the GPT runs: torch imported on demand (with the one-line fix when it
is missing), the device, bf16 autocast on CUDA, and seeded, deterministic
runs. Every other module of ``bpe/gpt/`` that needs torch at call time gets
it from :func:`require_torch`, so ``import bpe`` (and ``bpe --help``) never
imports torch.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

TORCH_MISSING = "the GPT needs PyTorch and numpy: pip install 'bpe[model]' (or: pip install torch numpy)"


def require_torch():
    """The ``torch`` module, or ImportError saying how to install it."""
    try:
        import numpy  # noqa: F401
        import torch
    except ImportError:
        raise ImportError(TORCH_MISSING) from None
    return torch


def resolve_device(device: Any = "auto"):
    """``"auto"`` (CUDA when PyTorch sees a GPU, else the CPU), ``"cpu"``,
    ``"cuda"``, ``"cuda:1"`` or a ``torch.device``, as a ``torch.device``."""
    torch = require_torch()
    if isinstance(device, torch.device):
        name = str(device)
    elif isinstance(device, str):
        name = device
    else:
        raise TypeError(f"device must be a str such as 'auto', 'cpu' or 'cuda', not {type(device).__name__}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; use auto, cpu or cuda (cuda:1, ...)") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r}, but PyTorch sees no CUDA GPU; use cpu (or auto)")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device {name!r} is not supported; use auto, cpu or cuda")
    return resolved


def autocast(device):
    """The context of a forward pass on ``device``: bf16 autocast on CUDA
    (half the memory traffic, tensor cores, and fp32's exponent range, so no
    loss scaling), plain float32 on the CPU (bf16 matmuls are slow on most
    CPUs). The model computes its losses in float32 either way."""
    torch = require_torch()
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")


def prepare(device) -> None:
    """Once per run on ``device``: on CUDA, whatever autocast leaves in
    float32 may use TF32 tensor cores."""
    if device.type == "cuda":
        require_torch().set_float32_matmul_precision("high")


@contextlib.contextmanager
def seeded(seed: int, device) -> Iterator[None]:
    """Seeds torch's global generators with ``seed`` and, on the CPU, turns
    on deterministic algorithms for the block (restored afterwards): the
    same seed gives the same weights and the same losses, bit for bit, on
    the same machine and thread count. (On CUDA the bf16 kernels are not
    bit-reproducible; runs agree to rounding.)"""
    torch = require_torch()
    was = torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(seed)
    if device.type == "cpu":
        torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was)


@contextlib.contextmanager
def cpu_threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``n`` for the block (None: left as they
    are). Small models on a busy machine run faster on fewer threads."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be a whole number of at least 1, got {n!r}")
    torch = require_torch()
    was = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(was)


class StopOnInterrupt:
    """Ctrl-C as a request to stop: inside the ``with`` block the first
    SIGINT only sets :attr:`requested`, which a training loop checks between
    steps, so it stops at a clean point (never inside an optimizer step or
    in the middle of a line of output) and can still report. A second
    Ctrl-C raises KeyboardInterrupt at once. Outside the main thread, or
    where SIGINT is ignored, nothing is installed (KeyboardInterrupt as
    usual)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def _handler(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGINT)
            if current is not signal.SIG_IGN:
                self._previous = current
                signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
