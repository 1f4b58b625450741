"""README's commands are the ones CI runs and the ones that work."""

from conftest import ROOT

TEST_COMMAND = "pip install -r requirements/test.lock -e '.[test,model]' && python tests/fetch_vocabs.py && cargo test && python -m pytest"
MAIN_COMMAND = "pip install . && bpe train corpora/tinyshakespeare.txt --vocab 4k -o shakespeare.bpe"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_COMMAND in readme
    assert TEST_COMMAND in ci.splitlines()
    # ... the way a background job runs it (issue: Ctrl-C tests failed under nohup).
    assert {"trap '' INT", "exec </dev/null"} <= set(ci.splitlines())


def test_the_test_command_installs_the_lock():
    """The lock pins every test and model dependency to an exact version."""
    lock = (ROOT / "requirements" / "test.lock").read_text()
    pins = [line.split(";")[0].strip() for line in lock.splitlines() if line and not line.startswith((" ", "#"))]
    assert pins and all("==" in p for p in pins), [p for p in pins if "==" not in p]
    names = {p.split("==")[0].lower() for p in pins}
    for needed in ("pytest", "hypothesis", "regex", "tiktoken", "tokenizers", "torch", "numpy"):
        assert needed in names, f"{needed} is not pinned in requirements/test.lock"


def test_main_command_is_in_readme_and_its_corpus_is_shipped():
    readme = (ROOT / "README.md").read_text()
    assert MAIN_COMMAND in readme
    assert (ROOT / "corpora" / "tinyshakespeare.txt").stat().st_size > 1_000_000


# --- The README's Python examples run --------------------------------------
# Every ```python block of README.md runs, in order, in one fresh interpreter
# (later blocks use the names of earlier ones, as a reader would), in a
# scratch directory that sees the shipped corpora/. A block preceded by a line
# `<!-- not run: REASON -->` is skipped; the reason must say where the same
# calls are tested instead.

def readme_python_blocks(readme: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block that runs."""
    blocks, lines, i = [], readme.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            if not previous.startswith("<!-- not run:"):
                blocks.append((start + 1, "\n".join(lines[start:j])))
            i = j
        i += 1
    return blocks


def test_readme_python_examples_run(tmp_path):
    import os
    import subprocess
    import sys

    blocks = readme_python_blocks((ROOT / "README.md").read_text())
    assert blocks
    (tmp_path / "corpora").symlink_to(ROOT / "corpora")
    # Each block is compiled with its README line numbers, so a failure points at the README.
    script = "\n".join(
        f"exec(compile({code!r}, 'README.md (block at line {line})', 'exec'))" for line, code in blocks
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )
    assert run.returncode == 0, run.stderr[-3000:]


def test_skipped_readme_blocks_say_why():
    readme = (ROOT / "README.md").read_text()
    for line in readme.splitlines():
        if line.startswith("<!-- not run:"):
            assert len(line) > len("<!-- not run:  -->") + 20, f"a skipped README block needs its reason: {line}"
