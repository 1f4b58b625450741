"""docs/architecture.md lists every module of the package (and of the Rust
core), each once, and nothing that is not there."""

from __future__ import annotations

import re

from conftest import ROOT

PAGE = ROOT / "docs" / "architecture.md"


def listed(prefix: str) -> list[str]:
    """The paths under ``prefix`` that start a list item: "- `path`: ..."."""
    return re.findall(rf"^- `({re.escape(prefix)}[^`]*)`:", PAGE.read_text(), re.M)


def test_every_python_module_is_listed_once():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bpe").rglob("*.py*")
                   if p.suffix in (".py", ".pyi") and "web" not in p.parts)
    names = listed("bpe/")
    assert len(names) == len(set(names)), "listed twice: " + ", ".join(sorted({n for n in names if names.count(n) > 1}))
    missing, stale = sorted(set(files) - set(names)), sorted(set(names) - set(files))
    assert not missing and not stale, f"not in docs/architecture.md: {missing}; listed but absent: {stale}"


def test_every_rust_file_is_listed_once():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "rust").rglob("*.rs"))
    names = listed("rust/")
    assert len(names) == len(set(names)), "listed twice: " + ", ".join(sorted({n for n in names if names.count(n) > 1}))
    missing, stale = sorted(set(files) - set(names)), sorted(set(names) - set(files))
    assert not missing and not stale, f"not in docs/architecture.md: {missing}; listed but absent: {stale}"
