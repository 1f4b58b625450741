"""The code's layout holds: modules in one direction, no file too long to read.

rust/lib.rs lists the Rust modules in order (each may use only those above
it); bpe/'s modules may import each other in any order that has no circle.
These are the rules README's "How it is built" describes; a change that
breaks them fails here, not in a reviewer's head.
"""

from __future__ import annotations

import ast
import re

from conftest import ROOT

MAX_LINES = 700  # a file one reads in a sitting


def rust_order() -> list[str]:
    lib = (ROOT / "rust" / "lib.rs").read_text()
    return re.findall(r"^\s*(?:pub )?mod (\w+);", lib, re.M)


def rust_files(module: str):
    single = ROOT / "rust" / f"{module}.rs"
    return [single] if single.exists() else sorted((ROOT / "rust" / module).rglob("*.rs"))


def test_rust_modules_use_only_modules_above_them():
    order = rust_order()
    # fuzzing (feature and tests only) checks everything; it comes last in spirit.
    rank = {m: (len(order) if m == "fuzzing" else i) for i, m in enumerate(order)}
    upward = []
    for module in order:
        for f in rust_files(module):
            for used in sorted(set(re.findall(r"\bcrate::(\w+)", f.read_text()))):
                if used in rank and used != module and rank[used] > rank[module]:
                    upward.append(f"{f.relative_to(ROOT)} uses crate::{used}, which lib.rs lists below {module}")
    assert not upward, "\n".join(upward)


def python_imports() -> dict[str, set[str]]:
    """bpe's modules and the bpe modules each imports (anywhere in the file)."""
    graph = {}
    for f in sorted((ROOT / "bpe").glob("*.py")):
        name = f.stem
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "bpe":
                    deps |= {a.name for a in node.names}
                elif node.module.startswith("bpe."):
                    deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith("bpe.")}
        graph[name] = {d for d in deps if (ROOT / "bpe" / f"{d}.py").exists() and d != name}
    return graph


def test_python_modules_import_in_one_direction():
    graph = python_imports()
    graph["__init__"] = set()  # the package re-exports; modules import their neighbours directly
    done, path = set(), []

    def visit(m):
        if m in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        path.append(m)
        for d in sorted(graph.get(m, ())):
            visit(d)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)


def test_no_file_is_too_long():
    files = [*(ROOT / "rust").rglob("*.rs"), *(ROOT / "bpe").glob("*.py")]
    long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}; split by idea"
