"""Types: `mypy --strict` passes on examples/typed_api.py (a program using the
whole public API) and on the typed modules, and bpe/_core.pyi declares
everything the built extension exports.

mypy reads bpe/ (with its `py.typed` marker and the `_core.pyi` stub) as an
installed user would; `--follow-imports=silent` checks the example's use of
bpe's annotations without requiring all of bpe/ to be strict-clean."""

import ast
import importlib.util
import inspect
import subprocess
import sys

import pytest

import bpe._core
from conftest import ROOT

STUB = ROOT / "bpe" / "_core.pyi"
# Modules written to pass --strict on their own.
STRICT_MODULES = ["bpe/decoder.py", "bpe/_tokenizer/budgets.py", "bpe/_tokenizer/pretrained.py", "bpe/_core.pyi"]


def mypy(*args, cache):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the test extra: pip install -e '.[test]')")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(cache),
         "--no-error-summary", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )


def test_mypy_strict_on_the_typed_example(tmp_path):
    r = mypy("examples/typed_api.py", cache=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_on_the_typed_modules(tmp_path):
    r = mypy(*STRICT_MODULES, cache=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_catches_a_wrong_type(tmp_path):
    """The check has teeth: a wrong use of the API fails it."""
    bad = ROOT / "examples" / f"_typing_probe_{tmp_path.name}.py"
    bad.write_text("from bpe import Tokenizer\n"
                   "def f(tok: Tokenizer) -> int:\n"
                   "    return tok.truncate('text', 3)\n")
    try:
        r = mypy(str(bad.relative_to(ROOT)), cache=tmp_path)
    finally:
        bad.unlink()
    assert r.returncode == 1 and "Incompatible return value type" in r.stdout


def test_the_example_runs():
    r = subprocess.run([sys.executable, "examples/typed_api.py"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "typed_api: ok" in r.stdout


def stub_names():
    """{name: set of its members (classes) or None} declared in the stub."""
    tree = ast.parse(STUB.read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
    return names


def test_the_stub_declares_every_export():
    declared = stub_names()
    exported = [n for n in dir(bpe._core) if not n.startswith("__")]
    missing = [n for n in exported if n not in declared]
    assert not missing, f"bpe/_core.pyi lacks {missing}: declare them (rust/py/mod.rs lists the module)"
    for name in exported:
        obj = getattr(bpe._core, name)
        if inspect.isclass(obj):
            methods = [m for m in vars(obj) if not m.startswith("__")]
            lacking = [m for m in methods if m not in declared[name]]
            assert not lacking, f"bpe/_core.pyi: class {name} lacks {lacking}"
    stale = [n for n in declared if not n.startswith("_") and n not in exported]
    assert not stale, f"bpe/_core.pyi declares {stale}, which the extension does not export"


def test_the_package_is_marked_typed():
    assert (ROOT / "bpe" / "py.typed").is_file()
    # maturin packs the whole bpe/ folder (python-source ".", python-packages
    # ["bpe"]), so py.typed and _core.pyi ship in the wheel beside _core.*.so.
    config = (ROOT / "pyproject.toml").read_text()
    assert 'python-packages = ["bpe"]' in config and 'python-source = "."' in config
