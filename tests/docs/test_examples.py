"""Every code example of README.md and of the documentation pages runs, and
works (tests/docs/doc_pages.py says how), so no page shows code that no longer
does what it says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from doc_pages import RUN, SHOWN, SKIP, blocks, pages, script

PAGES = pages()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_examples_run(page, tmp_path):
    page_blocks = blocks(page)
    if not any(b.lang in RUN and not b.skip for b in page_blocks):
        pytest.skip(f"{page.relative_to(ROOT)} has no example to run")
    (tmp_path / "corpora").symlink_to(ROOT / "corpora")
    # The `bpe` of this interpreter's environment first, whatever PATH says.
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    run = subprocess.run([sys.executable, "-c", script(page_blocks)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-4000:]


def test_the_readme_and_the_guides_have_examples_that_run():
    running = {b.page for p in PAGES for b in blocks(p) if b.lang in RUN and not b.skip}
    for page in ("README.md", "docs/index.md", "docs/training.md", "docs/encoding.md", "docs/pipeline.md",
                 "docs/interop.md", "docs/corpora.md", "docs/ray.md", "docs/inspect.md", "docs/cli.md"):
        assert page in running, f"{page} has no example that runs"


def test_every_block_names_its_language():
    """An untagged block would escape the runner: code is ```python or ```bash,
    anything else says what it is (```text for output and formats)."""
    for page in PAGES:
        for b in blocks(page):
            assert b.lang in RUN + SHOWN, f"{b.page}, line {b.line - 1}: a ``` block needs one of {RUN + SHOWN}"


def test_skipped_blocks_say_why():
    skipped = [b for page in PAGES for b in blocks(page) if b.skip]
    for b in skipped:
        reason = b.skip[len(SKIP):].removesuffix("-->").strip()
        assert len(reason) > 20, f"{b.page}, line {b.line - 1}: a skipped block needs its reason: {b.skip}"
    # Few, and each for a reason a test cannot meet (an install, a cluster, minutes of work).
    assert len(skipped) <= 12, [f"{b.page}:{b.line}" for b in skipped]
