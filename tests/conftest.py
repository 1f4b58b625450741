"""Shared test helpers: where the corpora are, and hypothesis profiles."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "corpora"
# The large corpora live outside the repo (CI has them; a user's clone may not).
SHARED = Path(os.environ.get("BPE_SHARED_CORPORA", ROOT.parent / "shared" / "corpora"))

# Text corpora shipped in corpora/ (the LICENSE files are text too, and tested as such).
CORPUS_FILES = sorted(p for p in CORPORA.iterdir() if p.suffix in (".txt",))

# CI runs more examples than a developer's quick run; both are seeded (derandomize)
# so a failure reproduces.
settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=60, deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def shared_file(rel: str) -> Path:
    """A file under ../shared/corpora. Where it is absent (a user's clone) the
    test is skipped with the reason; under CI, which has ../shared, it fails."""
    p = SHARED / rel
    if not p.exists():
        msg = f"{p} not found: the large corpora are only in the project's shared/ folder"
        if os.environ.get("CI"):
            pytest.fail(msg + " (CI runs with shared/ beside the clone)")
        pytest.skip(msg)
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
