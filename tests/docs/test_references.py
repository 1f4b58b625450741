"""Every reference to the documentation resolves: from the code (docstrings,
comments, error messages and help text in bpe/ and rust/, the tests, the
benchmarks) and from the pages themselves.

A reference is a path to a page under docs/, optionally with a section, written
with the section's anchor after a ``#`` or followed by the section's title in quotes
(``docs/dev/performance.md, "The hot loop"``); or a Markdown link
(``[text](PAGE.md#anchor)``) in README.md, CONTRIBUTING.md, CHANGELOG.md and the
pages. Sections are the pages' headings; anchors are mkdocs's (the toc
extension's slugs). The README holds no sections to cite: code cites the pages.
The site's own build checks its links too (``validation`` in mkdocs.yml).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from conftest import ROOT

DOCS = ROOT / "docs"
CODE_GLOBS = ("bpe/**/*.py", "bpe/**/*.pyi", "bpe/**/*.html", "bpe/**/*.js", "rust/**/*.rs", "fuzz/**/*.rs",
              "examples/*", "benchmarks/*.py", "benchmarks/*.sh", "benchmarks/*.md", "tests/**/*.py",
              "tests/**/*.md", ".ci/run", "build.rs", "Cargo.toml", "pyproject.toml", "mkdocs.yml")
PAGES_GLOBS = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/**/*.md")

DOC_REF = re.compile(r"""docs/([\w./-]+?\.md)(?:\#([\w-]+))?((?:\s*[,:(]?\s*["“][A-Za-z`][^"”]*["”]\s*,?)*)""")
TITLE = re.compile(r"""["“]([A-Za-z`][^"”]*)["”]""")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_SECTION = re.compile(r"""README(?:\.md)?(?:'s)?(?:\s*[,:(]\s*|\s+)(?:["“*]|section)""")


def _files(globs) -> list[Path]:
    out = set()
    for g in globs:
        out.update(p for p in ROOT.glob(g) if p.is_file() and "target" not in p.parts)
    return sorted(out)


def _flatten(text: str) -> str:
    """Comments and docstrings wrapped over lines, as one line: a title cut by a
    line break is found whole."""
    text = re.sub(r"\n\s*(?://[/!]?|#|\*)?\s*", " ", text)
    return text


def _slug(title: str) -> str:
    from markdown.extensions.toc import slugify

    return slugify(re.sub(r"[`*]", "", title), "-")


@lru_cache(maxsize=None)
def _generated() -> dict[str, str]:
    """What docs/hooks/generated.py puts in place of each marker at build time."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks_generated", DOCS / "hooks" / "generated.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return {hooks.CLI_MARKER: hooks.cli_reference(), hooks.RESULTS_MARKER: hooks.latest_results()}


@lru_cache(maxsize=None)
def _headings(page: Path) -> tuple[set[str], set[str]]:
    """(titles, anchors) of a page's headings, outside code blocks, those of
    its generated parts included."""
    text = page.read_text(encoding="utf-8")
    for marker, generated in _generated().items():
        text = text.replace(marker, generated)
    titles, anchors, fence = set(), set(), False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip()
            titles.add(re.sub(r"[`*]", "", title))
            anchors.add(_slug(title))
    return titles, anchors


def _check(where: str, page: Path, anchor: str | None, titles: list[str], problems: list[str]) -> None:
    if not page.is_file():
        problems.append(f"{where}: {page.relative_to(ROOT)} does not exist")
        return
    known_titles, known_anchors = _headings(page)
    if anchor and anchor not in known_anchors:
        problems.append(f"{where}: {page.relative_to(ROOT)} has no section #{anchor}")
    for title in titles:
        if title not in known_titles:
            problems.append(f"{where}: {page.relative_to(ROOT)} has no section \"{title}\"")


def test_references_from_code_resolve():
    problems: list[str] = []
    files = _files(CODE_GLOBS)
    assert len(files) > 150
    for path in files:
        text = _flatten(path.read_text(encoding="utf-8", errors="replace"))
        for m in DOC_REF.finditer(text):
            titles = TITLE.findall(m.group(3) or "")
            _check(str(path.relative_to(ROOT)), ROOT / "docs" / m.group(1), m.group(2), titles, problems)
    assert not problems, "\n".join(problems)


def test_no_code_cites_a_readme_section():
    """The README is a short introduction; what code cites lives in docs/."""
    problems = []
    for path in _files(CODE_GLOBS):
        text = _flatten(path.read_text(encoding="utf-8", errors="replace"))
        for m in README_SECTION.finditer(text):
            problems.append(f"{path.relative_to(ROOT)}: {text[max(0, m.start() - 40):m.end() + 40]!r}")
    assert not problems, "cite a page of docs/ instead:\n" + "\n".join(problems)


def test_links_between_pages_resolve():
    problems: list[str] = []
    for path in _files(PAGES_GLOBS):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # code is not links
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#") and path.parent != DOCS:
                continue  # a URL (checked by nobody here), or an anchor of README
            file, _, anchor = target.partition("#")
            page = path if not file else (path.parent / file).resolve()
            if page == DOCS / "assets" / "chart.png":  # published by docs/hooks/generated.py
                page = ROOT / "benchmarks" / "results" / "chart.png"
            if page.suffix == ".md":
                _check(str(path.relative_to(ROOT)), page, anchor or None, [], problems)
            elif not page.exists():
                problems.append(f"{path.relative_to(ROOT)}: {target} does not exist")
        for m in DOC_REF.finditer(_flatten(text)):
            titles = TITLE.findall(m.group(3) or "")
            _check(str(path.relative_to(ROOT)), ROOT / "docs" / m.group(1), m.group(2), titles, problems)
    assert not problems, "\n".join(problems)


def test_benchmark_results_that_are_cited_exist():
    """benchmarks/results/ keeps latest.md, the chart and the files a page or the
    code cites; each citation names a file that is there."""
    problems = []
    # The benchmarks' own code names the files it writes (not all committed): not citations.
    for path in _files(tuple(g for g in CODE_GLOBS if g != "benchmarks/*.py") + PAGES_GLOBS):
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in re.findall(r"(?:benchmarks/)?results/([\w.-]+\.(?:md|png))", text):
            if not (ROOT / "benchmarks" / "results" / name).is_file():
                problems.append(f"{path.relative_to(ROOT)}: benchmarks/results/{name} does not exist")
    assert not problems, "\n".join(problems)


def test_paths_named_in_the_pages_exist():
    """A file or folder of the repository that a page names (`rust/encode/memo.rs`,
    `tests/reliability/`) is there: pages follow the code when it moves."""
    problems = []
    named = re.compile(r"(?<![\w/.~-])((?:bpe|rust|tests|benchmarks|examples|fuzz|corpora|requirements|docs)/[\w./-]*[\w/])")
    for path in _files(("README.md", "CONTRIBUTING.md", "docs/**/*.md")):
        for name in set(named.findall(path.read_text(encoding="utf-8"))):
            # bpe/_core.pyi may be named as the module; examples/profile as the program.
            if not any((ROOT / n).exists() for n in (name, name + "i", name + ".rs")):
                problems.append(f"{path.relative_to(ROOT)}: {name}")
    assert not problems, "no such file or folder:\n" + "\n".join(sorted(problems))
