"""The Python package's layout holds (docs/architecture.md describes it):

- one layering rule, import-linter's contract in pyproject.toml: the command
  line on top, then the GPT, then inspect | distributed, data, the
  tokenizer, formats | sources, and the utilities at the bottom; each layer
  imports only those below it, imports inside functions included;
- no module of the package imports the package's root (``bpe/__init__.py``
  imports everything), except for the compiled core (``from bpe import
  _core``) and the command line's version string;
- every package has a docstring saying its job and an explicit ``__all__``,
  every module a docstring;
- no file is too long to read in a sitting, and few modules stand at the top.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

MAX_LINES = 600  # a file one reads in a sitting
MAX_TOP_MODULES = 12
PACKAGE = ROOT / "bpe"


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "web" not in p.relative_to(PACKAGE).parts)


def lint_imports(cwd) -> subprocess.CompletedProcess:
    """`lint-imports` on the package found from ``cwd`` (``bpe/`` there)."""
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_layers_contract_holds():
    """`lint-imports` (import-linter) checks pyproject.toml's layers contract."""
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_the_contract_catches_an_upward_import(tmp_path):
    """The same check on a copy of the package where a utility imports the
    command line, inside a function: it must fail, naming that import."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(PACKAGE, tmp_path / "bpe", ignore=shutil.ignore_patterns("*.so", "__pycache__", "web"))
    files = tmp_path / "bpe" / "_util" / "files.py"
    files.write_text(files.read_text() + "\n\ndef _upward():\n    from bpe.cli import arguments\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0 and "0 kept, 1 broken" in done.stdout, done.stdout[-3000:]
    assert "bpe._util is not allowed to import bpe.cli" in done.stdout


def test_no_module_imports_the_package_root():
    bad = []
    for f in modules():
        rel = f.relative_to(ROOT)
        if f == PACKAGE / "__init__.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "bpe" and node.level == 0:
                # `from bpe import data` names a subpackage: not the root's own names.
                names = {a.name for a in node.names} - {"_core"} - {p.name for p in PACKAGE.iterdir() if p.is_dir()}
                if names:
                    bad.append(f"{rel}:{node.lineno}: from bpe import {', '.join(sorted(names))}")
            elif isinstance(node, ast.Import) and any(a.name == "bpe" for a in node.names):
                if rel.parts[1] != "cli":  # the command line reads bpe.__version__
                    bad.append(f"{rel}:{node.lineno}: import bpe")
    assert not bad, "import from the submodule that defines the name instead:\n" + "\n".join(bad)


def test_packages_say_their_job_and_their_public_names():
    missing = []
    for f in modules():
        tree = ast.parse(f.read_text())
        if not ast.get_docstring(tree):
            missing.append(f"{f.relative_to(ROOT)}: no module docstring")
        if f.name == "__init__.py" and f.parent != PACKAGE:
            if not any(isinstance(n, (ast.Assign, ast.AnnAssign)) and "__all__" in ast.unparse(n).split("=")[0]
                       for n in tree.body):
                missing.append(f"{f.relative_to(ROOT)}: no __all__")
    assert not missing, "\n".join(missing)


def test_no_file_is_too_long():
    files = [*modules(), *sorted((ROOT / "tests").rglob("*.py"))]
    long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}; split by idea"


def test_few_modules_stand_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules at the top of bpe/: {top}; group them in packages"
