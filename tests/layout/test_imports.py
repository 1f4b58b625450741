"""Every ``from bpe... import name`` in the package names a module that
exists and a name it has, imports inside functions included (a moved module
would otherwise fail only when that function first runs)."""

from __future__ import annotations

import ast
import importlib

from conftest import ROOT


def test_every_import_of_bpe_resolves():
    bad = []
    for f in sorted((ROOT / "bpe").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            if node.module != "bpe" and not node.module.startswith("bpe."):
                continue
            where = f"{f.relative_to(ROOT)}:{node.lineno}"
            try:
                module = importlib.import_module(node.module)
            except ImportError as e:
                bad.append(f"{where}: {node.module}: {e}")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        bad.append(f"{where}: {node.module} has no {alias.name}")
    assert not bad, "\n".join(bad)
