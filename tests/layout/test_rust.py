"""The Rust tree's layout holds (rust/lib.rs describes it):

- rust/lib.rs lists the top-level modules in a strict one-way order: each
  uses only modules listed above it. A use is any path to another top-level
  module, anywhere in any file of the module (its folder included):
  ``crate::a::b``, the items of a group ``use crate::{a, b::c}``, and
  ``super::`` paths that climb to the crate root;
- one module-file style: a folder module is ``foo/mod.rs``, never ``foo.rs``
  beside a ``foo/`` folder;
- few loose files at the top of rust/ (the stages are folders), and no file
  too long to read in a sitting, tests included;
- every ``unsafe`` block and ``unsafe impl`` says why it is sound: a
  ``SAFETY:`` comment on its line or within the few lines above it. (Clippy's
  ``undocumented_unsafe_blocks``, Cargo.toml, checks the code one build
  compiles; this reads every ``cfg``: free-threaded Python, other CPUs,
  Miri.)

A change that breaks them fails here, not in a reviewer's head.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

from conftest import ROOT

RUST = ROOT / "rust"
MAX_LINES = 600  # a file one reads in a sitting
MAX_LOOSE_FILES = 8  # .rs files directly in rust/, lib.rs included
SAFETY_REACH = 3  # lines above an unsafe block where its SAFETY comment may end

# `crate::x`, `crate::{...}`, `super::x`, `super::super::{...}`.
PATH = re.compile(r"\b(crate|super(?:::super)*)::(?:(\w+)|\{)")
UNSAFE = re.compile(r"\bunsafe\s*\{|\bunsafe\s+impl\b")


def top_modules(rust: Path = RUST) -> list[str]:
    """The top-level modules, in lib.rs's order."""
    lib = (rust / "lib.rs").read_text()
    return re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+);", lib, re.M)


def module_files(rust: Path, module: str) -> list[Path]:
    """The files of a top-level module: `module.rs`, or its folder's."""
    single = rust / f"{module}.rs"
    return [single] if single.exists() else sorted((rust / module).rglob("*.rs"))


def module_path(rust: Path, f: Path) -> list[str]:
    """The module a file is, as a path from the crate root."""
    parts = list(f.relative_to(rust).with_suffix("").parts)
    return parts[:-1] if parts[-1] in ("mod", "lib") else parts


def inline_depths(text: str) -> list[int]:
    """Per line, how many inline modules (`mod tests {`) it is inside. The
    code is rustfmt's: a module's closing brace is alone on a line at the
    indentation of its `mod`."""
    depths, open_at = [], []
    for line in text.splitlines():
        if open_at and line == " " * open_at[-1] + "}":
            open_at.pop()
        depths.append(len(open_at))
        m = re.match(r"( *)(?:pub(?:\([^)]*\))? )?mod \w+ \{$", line)
        if m:
            open_at.append(len(m.group(1)))
    return depths


def group_items(text: str, start: int) -> list[str]:
    """The first names of the items of the `{...}` group that opens just
    before `start` (`a` and `b` in `{a, b::{c, d}}`)."""
    depth, item, items = 1, "", []
    for c in text[start:]:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        if c == "," and depth == 1:
            items.append(item)
            item = ""
        else:
            item += c
    items.append(item)
    return [m.group(0) for i in items if (m := re.match(r"\w+", i.strip()))]


def top_level_uses(rust: Path, f: Path) -> set[str]:
    """The names that `f` reaches at the crate root (any path, any group)."""
    text = f.read_text()
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    depths = inline_depths(text)
    here = module_path(rust, f)
    used = set()
    for m in PATH.finditer(text):
        head = m.group(1)
        if head != "crate":
            line = bisect.bisect_right(line_starts, m.start()) - 1
            if head.count("super") != len(here) + depths[line]:
                continue  # stays inside the file's own top-level module
        used |= {m.group(2)} if m.group(2) else set(group_items(text, m.end()))
    return used


def upward_uses(rust: Path = RUST) -> list[str]:
    order = top_modules(rust)
    rank = {m: i for i, m in enumerate(order)}
    upward = []
    for module in order:
        for f in module_files(rust, module):
            for used in sorted(top_level_uses(rust, f)):
                if used in rank and rank[used] > rank[module]:
                    upward.append(f"{f.relative_to(rust)} uses crate::{used}, which lib.rs lists below {module}")
    return upward


def long_files(rust: Path = RUST) -> dict[str, int]:
    return {
        str(f.relative_to(rust)): n
        for f in sorted(rust.rglob("*.rs"))
        if (n := len(f.read_text().splitlines())) > MAX_LINES
    }


def loose_files(rust: Path = RUST) -> list[str]:
    return sorted(f.name for f in rust.glob("*.rs"))


def mixed_module_files(rust: Path = RUST) -> list[str]:
    """Folders with a `foo.rs` beside them, and folders without a mod.rs."""
    bad = []
    for d in sorted(p for p in rust.rglob("*") if p.is_dir()):
        if d.with_suffix(".rs").exists():
            bad.append(f"{d.relative_to(rust)}.rs beside {d.relative_to(rust)}/: make it {d.relative_to(rust)}/mod.rs")
        if any(d.glob("*.rs")) and not (d / "mod.rs").exists():
            bad.append(f"{d.relative_to(rust)}/ has no mod.rs")
    return bad


def is_comment(line: str) -> bool:
    return line.lstrip().startswith("//")


def undocumented_unsafe(rust: Path = RUST) -> list[str]:
    """`unsafe {` and `unsafe impl` without a `SAFETY:` comment on their line
    or on one of the `SAFETY_REACH` lines above. A longer argument counts
    whole (its first line may be further up) if it is the comment nearest
    above, ending within reach."""
    bad = []
    for f in sorted(rust.rglob("*.rs")):
        lines = f.read_text().splitlines()
        for i, line in enumerate(lines):
            if is_comment(line) or not UNSAFE.search(line):
                continue
            start = max(0, i - SAFETY_REACH)
            nearest = next((j for j in range(i - 1, start - 1, -1) if is_comment(lines[j])), None)
            if nearest is not None:
                while nearest > 0 and is_comment(lines[nearest - 1]):
                    nearest -= 1
                start = min(start, nearest)
            if not any("SAFETY:" in l for l in lines[start : i + 1]):
                bad.append(f"{f.relative_to(rust)}:{i + 1}: {line.strip()}")
    return bad


def test_modules_use_only_modules_above_them():
    upward = upward_uses()
    assert not upward, "\n".join(upward)


def test_every_module_lib_rs_lists_exists():
    order = top_modules()
    assert order and "fuzzing" in order
    missing = [m for m in order if not module_files(RUST, m)]
    assert not missing, f"lib.rs lists modules with no file: {missing}"


def test_no_file_is_too_long():
    long = long_files()
    assert not long, f"over {MAX_LINES} lines: {long}; split by idea (tests into their own file)"


def test_few_files_at_the_top():
    loose = loose_files()
    assert len(loose) <= MAX_LOOSE_FILES, f"{len(loose)} files directly in rust/: {loose}; group them by stage"


def test_folder_modules_use_mod_rs():
    bad = mixed_module_files()
    assert not bad, "\n".join(bad)


def test_unsafe_code_says_why_it_is_sound():
    bad = undocumented_unsafe()
    assert not bad, "unsafe without a `// SAFETY:` comment just above:\n" + "\n".join(bad)


def test_the_checks_catch_violations(tmp_path):
    """Each check fails on a small tree that breaks its rule."""
    rust = tmp_path / "rust"
    files = {
        "lib.rs": "pub mod low;\npub mod mid;\npub mod high;\n",
        "low.rs": "pub fn f() {}\n",
        "mid/mod.rs": "mod inner;\n",
        # A grouped import, a path deep in the code, super:: to the root,
        # each reaching a module below `mid`.
        "mid/inner.rs": (
            "use crate::{low::f, high::g};\n"
            "fn h() { crate::high::g(); super::super::high::g(); }\n"
            "#[cfg(test)]\nmod tests {\n    use super::super::low;\n}\n"
        ),
        "high.rs": "pub fn g() { crate::low::f(); let _ = unsafe { 1 }; }\n",
    }
    for name, text in files.items():
        (rust / name).parent.mkdir(parents=True, exist_ok=True)
        (rust / name).write_text(text)
    assert upward_uses(rust) == ["mid/inner.rs uses crate::high, which lib.rs lists below mid"]
    assert top_level_uses(rust, rust / "mid" / "inner.rs") == {"low", "high"}
    assert undocumented_unsafe(rust) == ["high.rs:1: pub fn g() { crate::low::f(); let _ = unsafe { 1 }; }"]
    (rust / "high.rs").write_text("// SAFETY: none needed.\n\npub fn g() {\n    unsafe { 1 };\n}\n")
    assert undocumented_unsafe(rust) == []
    (rust / "high.rs").write_text("// SAFETY: too far.\n\n\npub fn g() {\n    unsafe { 1 };\n}\n")
    assert len(undocumented_unsafe(rust)) == 1
    long_argument = "".join(f"// line {k} of the argument\n" for k in range(6))
    (rust / "high.rs").write_text(f"// SAFETY: a long argument.\n{long_argument}unsafe impl Send for G {{}}\n")
    assert undocumented_unsafe(rust) == []
    (rust / "high.rs").write_text(
        "// SAFETY: for Sync.\n// more.\nunsafe impl Sync for G {}\n// not one.\nunsafe impl Send for G {}\n"
    )
    assert undocumented_unsafe(rust) == ["high.rs:5: unsafe impl Send for G {}"]
    (rust / "mid.rs").write_text("\n" * (MAX_LINES + 1))
    (rust / "low").mkdir()
    (rust / "low" / "x.rs").write_text("")
    assert mixed_module_files(rust) == [
        "low.rs beside low/: make it low/mod.rs",
        "low/ has no mod.rs",
        "mid.rs beside mid/: make it mid/mod.rs",
    ]
    assert long_files(rust) == {"mid.rs": MAX_LINES + 1}
    for k in range(MAX_LOOSE_FILES):
        (rust / f"extra{k}.rs").write_text("")
    assert len(loose_files(rust)) > MAX_LOOSE_FILES
