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


# The README's code examples run with those of the documentation: tests/docs/test_examples.py.
