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
    """A file under ../shared/corpora, or skip the test with the reason."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"{p} not found: the large corpora are only in the project's shared/ folder")
    return p
