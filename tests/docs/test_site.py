"""The documentation site (mkdocs.yml, docs/) builds with every warning an
error, its command-line reference is the parser's, its API reference holds
every public name, and a real browser shows its pages.

The site is built once per session into a temporary directory
(`mkdocs build --strict`, a few seconds); mkdocs and its plugins are in the test
extra (the `docs` extra installs them alone). Without them the tests skip,
except under CI, where they fail.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

HOOKS = ROOT / "docs" / "hooks" / "generated.py"
PUBLIC = ("bpe", "bpe.data", "bpe.distributed", "bpe.tiktoken")


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        msg = f"{module} is not installed: pip install -e '.[docs]' (the test extra has it too)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site's directory, and mkdocs's output."""
    _needs("mkdocs")
    _needs("mkdocstrings_handlers.python")
    _needs("material")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                          "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    return out, run


def test_the_site_builds_strictly(site):
    out, run = site
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "WARNING" not in run.stderr, run.stderr[-3000:]
    for page in ("index.html", "api/index.html", "cli/index.html", "performance/index.html", "assets/chart.png"):
        assert (out / page).is_file(), page


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks_generated", HOOKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parsers(parser: argparse.ArgumentParser, name: str):
    """(name, parser) of the command and of every subcommand under it."""
    yield name, parser
    for sub_name, _, sub in _hooks()._subcommands(parser):
        yield from _parsers(sub, f"{name} {sub_name}")


def test_the_cli_reference_is_the_parsers(site):
    """Every command and every option string of `bpe.cli.build_parser()` is on
    the page, and docs/cli.md writes none of them out by hand: the reference is
    generated (docs/hooks/generated.py)."""
    from bpe.cli import build_parser

    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    page = (out / "cli" / "index.html").read_text(encoding="utf-8")
    source = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "<!-- generated: cli-reference -->" in source
    commands = list(_parsers(build_parser(), "bpe"))
    assert len(commands) >= 12
    for name, parser in commands[1:]:
        anchor = name.replace(" ", "-")
        assert f'id="{anchor}"' in page, f"no section for `{name}` in the command-line reference"
        assert f"<code>{name}</code>" in page
        for action in parser._actions:  # noqa: SLF001
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"<code>{option}" in page, f"`{name} {option}` is not in the command-line reference"
    # Written once: the tables are the generator's, not copies in the page's source.
    assert "| argument | meaning |" not in source and "--min-frequency N" not in source


def test_the_api_reference_has_every_public_name(site):
    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    page = (out / "api" / "index.html").read_text(encoding="utf-8")
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        assert f'id="{module_name}"' in page, module_name
        if module_name == "bpe.tiktoken":  # the same objects as bpe's, documented there
            continue
        for name in module.__all__:
            assert f'id="{module_name}.{name}"' in page, f"{module_name}.{name} is not in the API reference"
    for method in ("train", "encode", "decode", "encode_batch", "save", "load", "truncate", "from_tiktoken"):
        assert f'id="bpe.Tokenizer.{method}"' in page
    assert 'id="bpe._core.CoreBPE"' in page  # from bpe/_core.pyi


# -- in a browser ------------------------------------------------------------------------


def _chromium():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("needs Chromium and its driver: apt-get install -y chromium chromium-driver (.ci/run does)")
    from selenium import webdriver  # the test extra
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1200,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def test_a_browser_shows_the_home_and_api_pages(site):
    """Headless Chromium opens the built site from disk and finds the pages'
    headings, the navigation to the references, and the API's entries."""
    from selenium.webdriver.common.by import By

    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    driver = _chromium()
    try:
        driver.get((out / "index.html").as_uri())
        assert driver.find_element(By.CSS_SELECTOR, "article h1").text.strip() == "bpe"
        assert "bpe" in driver.title
        # The navigation (some of it folded away: its text content, not what is drawn).
        links = {" ".join(a.get_attribute("textContent").split()) for a in driver.find_elements(By.CSS_SELECTOR, "nav a")}
        assert {"Install", "Command line", "Python API"} <= links, links

        driver.get((out / "api" / "index.html").as_uri())
        assert driver.find_element(By.CSS_SELECTOR, "article h1").text.strip() == "Python API"
        headings = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "article h2, article h3")]
        for name in ("Tokenizer", "count", "bpe.data", "bpe.distributed", "write_dataset"):
            assert any(name in h for h in headings), (name, headings[:40])
        assert driver.find_element(By.ID, "bpe.Tokenizer.encode").is_displayed()

        driver.get((out / "cli" / "index.html").as_uri())
        assert driver.find_element(By.ID, "bpe-train").text.strip().startswith("bpe train")
    finally:
        driver.quit()
