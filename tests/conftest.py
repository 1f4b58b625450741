"""Shared test helpers: where the corpora are, and hypothesis profiles."""

import os
import signal
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "corpora"
# The large corpora live outside the repo, in shared/ beside it (CI has them; a
# user's clone may not). A clone made from a local checkout (`git clone . "$d"`,
# the pre-push check) finds them beside the checkout it came from.
def _find_shared() -> Path:
    if "BPE_SHARED_CORPORA" in os.environ:
        return Path(os.environ["BPE_SHARED_CORPORA"])
    candidates = [ROOT.parent / "shared" / "corpora"]
    try:
        origin = subprocess.run(["git", "-C", str(ROOT), "remote", "get-url", "origin"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        if origin and "://" not in origin and Path(origin).is_dir():
            candidates.append(Path(origin).resolve().parent / "shared" / "corpora")
    except (OSError, subprocess.SubprocessError):
        pass  # no git: only the first candidate
    return next((c for c in candidates if c.is_dir()), candidates[0])


SHARED = _find_shared()

# Text corpora shipped in corpora/ (the LICENSE files are text too, and tested as such).
CORPUS_FILES = sorted(p for p in CORPORA.iterdir() if p.suffix in (".txt",))

# CI runs more examples than a developer's quick run; both are seeded (derandomize)
# so a failure reproduces.
settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=60, deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def default_sigint() -> None:
    """``preexec_fn`` for every child a test will send SIGINT (Ctrl-C).

    A child inherits an *ignored* signal: under ``nohup``, in a background job
    of a non-interactive shell (``cmd &``) and on some CI runners the test
    process starts with SIGINT ignored, the child Python then keeps it ignored,
    and the signal the test sends does nothing. Restoring the default here, in
    the child between fork and exec, makes the child's Python install its own
    handler (KeyboardInterrupt) as it does when started from a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shared_file(rel: str) -> Path:
    """A file under shared/corpora; where it is absent (a user's clone) the test
    is skipped, saying which file and where it was looked for."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"{p} not found: the large corpora are only in the project's shared/ folder "
                    "beside the clone (or set BPE_SHARED_CORPORA to their directory)")
    return p

# --- OpenAI's real vocabularies, offline -------------------------------------
# tests/fetch_vocabs.py (run by the README's test command) puts them in a cache
# directory; tiktoken reads it through TIKTOKEN_CACHE_DIR. Set it before
# tiktoken loads anything.
import fetch_vocabs  # noqa: E402  (tests/ is on sys.path)

os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(fetch_vocabs.CACHE))
ENCODINGS = ["r50k_base", "cl100k_base", "o200k_base"]


@pytest.fixture(autouse=True, scope="session")
def _no_network_for_tiktoken():
    """A test that makes tiktoken download is a bug: make it fail loudly."""
    import tiktoken.load

    saved = tiktoken.load.read_file

    def refuse(blobpath):
        if "://" in blobpath:
            raise RuntimeError(f"a test tried to download {blobpath}; run `python tests/fetch_vocabs.py` first")
        return saved(blobpath)  # a local file

    tiktoken.load.read_file = refuse
    yield
    tiktoken.load.read_file = saved


def require_vocab(name: str) -> None:
    """Skip (fail under CI) when OpenAI's file for `name` is not in the cache."""
    if not fetch_vocabs.cache_path(name).exists():
        msg = f"{name} is not in {fetch_vocabs.CACHE}: run `python tests/fetch_vocabs.py`"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
