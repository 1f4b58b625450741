"""mkdocs hook: the parts of the site that are generated, never written twice.

- ``<!-- generated: cli-reference -->`` (in ``cli.md``) becomes the reference of
  every ``bpe`` command, made from the argparse parser itself
  (``bpe.cli.build_parser()``): usage, description, and each argument with its
  help and default.
- ``<!-- generated: benchmarks/results/latest.md -->`` (in ``performance.md``)
  becomes the tables of the latest benchmark run, as ``benchmarks/run.py``
  wrote them (headings moved one level down), and ``benchmarks/results/chart.png``
  is published as ``assets/chart.png``.

mkdocs loads this file by its path (``hooks:`` in ``mkdocs.yml``);
``tests/docs/test_site.py`` imports it to check the reference against the parser.
"""

from __future__ import annotations

import argparse
import html
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LATEST = ROOT / "benchmarks" / "results" / "latest.md"
CHART = ROOT / "benchmarks" / "results" / "chart.png"
CHART_URL = "assets/chart.png"

CLI_MARKER = "<!-- generated: cli-reference -->"
RESULTS_MARKER = "<!-- generated: benchmarks/results/latest.md -->"


# -- the command-line reference -------------------------------------------------


def _text(s: str) -> str:
    """Help text as Markdown text for a table cell: HTML-escaped, pipes kept out
    of the table, ``*`` and ``_`` literal (``2**30`` is no emphasis); what is in
    backticks stays code."""
    parts = " ".join(s.split()).split("`")
    for i, part in enumerate(parts):
        if i % 2 == 0:  # text; the odd parts are code spans, which Markdown shows as they are
            part = html.escape(part, quote=False).replace("|", "&#124;")
            parts[i] = re.sub(r"([*_])", r"\\\1", part)
    return "`".join(parts)


def _usage(parser: argparse.ArgumentParser) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "96"  # the same wrapping on every machine
    try:
        return parser.format_usage().strip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the parser's order."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps no public list
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            helps = {a.dest: a.help or "" for a in action._choices_actions}  # noqa: SLF001
            return [(name, helps.get(name, ""), p) for name, p in action.choices.items()]
    return []


def _argument_row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()  # noqa: SLF001
    if action.option_strings:
        if action.nargs == 0:
            names = ", ".join(f"`{o}`" for o in action.option_strings)
        else:
            metavar = formatter._format_args(action, action.dest.upper())  # noqa: SLF001
            names = ", ".join(f"`{o} {metavar}`" for o in action.option_strings)
    else:
        names = f"`{formatter._metavar_formatter(action, action.dest)(1)[0]}`"  # noqa: SLF001
    text = formatter._expand_help(action) if action.help else ""  # noqa: SLF001
    return f"| {names.replace('|', '&#124;')} | {_text(text)} |"


def _command(parser: argparse.ArgumentParser, title: str, summary: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{title}`", ""]
    description = parser.description or summary
    if description:
        out += [_text(description), ""]
    out += ["```text", _usage(parser), "```", ""]
    actions = [a for a in parser._actions  # noqa: SLF001
               if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction,  # noqa: SLF001
                                                                      argparse._SubParsersAction))]  # noqa: SLF001
    if actions:
        out += ["| argument | meaning |", "|---|---|"]
        out += [_argument_row(parser, a) for a in actions]
        out.append("")
    for name, help_text, sub in _subcommands(parser):
        out += _command(sub, f"{title} {name}", help_text, level + 1)
    return out


def cli_reference() -> str:
    """The reference of every command, as Markdown, from ``bpe.cli.build_parser()``."""
    from bpe.cli import build_parser

    parser = build_parser()
    out = ["```text", _usage(parser), "```", ""]
    out += ["| command | what it does |", "|---|---|"]
    out += [f"| [`bpe {name}`](#bpe-{name}) | {_text(help_text)} |" for name, help_text, _ in _subcommands(parser)]
    out.append("")
    for name, help_text, sub in _subcommands(parser):
        out += _command(sub, f"bpe {name}", help_text, 2)
    return "\n".join(out)


# -- the latest benchmark results -----------------------------------------------


def latest_results() -> str:
    """``benchmarks/results/latest.md``, its headings one level down (the page has its own title)."""
    text = LATEST.read_text(encoding="utf-8")
    return re.sub(r"^(#{1,5}) ", lambda m: "#" + m.group(1) + " ", text, flags=re.M)


# -- mkdocs events ----------------------------------------------------------------


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, CHART_URL, abs_src_path=str(CHART)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if RESULTS_MARKER in markdown:
        markdown = markdown.replace(RESULTS_MARKER, latest_results())
    return markdown
