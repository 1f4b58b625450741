"""README's commands are the ones CI runs and the ones that work."""

from conftest import ROOT

TEST_COMMAND = "pip install -e '.[test,model]' && python tests/fetch_vocabs.py && cargo test && python -m pytest"
MAIN_COMMAND = "pip install . && bpe train corpora/tinyshakespeare.txt --vocab 4k -o shakespeare.bpe"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_COMMAND in readme
    assert TEST_COMMAND in ci.splitlines()


def test_main_command_is_in_readme_and_its_corpus_is_shipped():
    readme = (ROOT / "README.md").read_text()
    assert MAIN_COMMAND in readme
    assert (ROOT / "corpora" / "tinyshakespeare.txt").stat().st_size > 1_000_000
