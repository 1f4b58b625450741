"""`bpe show` (bpe/inspect/show.py), and the worked token counts of docs/inspect.md, checked
against tiktoken."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import ROOT, require_vocab
from hypothesis import given
from hypothesis import strategies as st
from helpers import assert_clean_failure, ok, run

from bpe import Tokenizer
from bpe.inspect.show import VISIBLE, piece, pieces, render

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _aa_tokenizer() -> Tokenizer:
    return Tokenizer([(97, 97)], "gpt2", {})


@pytest.fixture(scope="module")
def aa_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "aa.bpe"
    _aa_tokenizer().save(path)
    return path


def test_piece():
    assert piece(b" a\tb\n") == "·a→b↵"
    assert piece("é".encode()) == "é"
    assert piece(b"\xc3") == "<0xC3>"  # half of "é"
    assert piece(b" \xe2\x80") == "·<0xE2><0x80>"


@given(st.text())
def test_pieces_spell_the_text(text):
    tok = _aa_tokenizer()
    shown = "".join(pieces(tok, tok.encode_ordinary(text)))
    data = text.encode("utf-8", errors="replace")
    if "<0x" not in shown:  # no character split across tokens: the text, whitespace made visible
        assert shown == data.decode("utf-8").translate(str.maketrans(VISIBLE))


def test_plain_when_not_a_terminal(tmp_path, aa_file):
    # stdout is a pipe here: no colour, "|" between tokens.
    result = ok(run("show", "-t", aa_file, "aaa a\nb", cwd=tmp_path))
    assert "\x1b[" not in result.stdout
    # "aaa" -> [aa][a]; " a" -> [ ][a]; "\n" -> [\n]; "b": 6 tokens.
    assert result.stdout == "aa|a|·|a|↵\n|b\n"
    assert result.stderr == "6 tokens, 7 characters, 7 bytes\n"
    result = ok(run("show", "-t", aa_file, "--ids", "-q", "aa é", cwd=tmp_path))
    assert result.stdout == "aa[256]|·[32]|<0xC3>[195]|<0xA9>[169]\n" and result.stderr == ""


def test_colour_forced(tmp_path, aa_file):
    result = ok(run("show", "-t", aa_file, "--color", "always", "aaa a\nb", cwd=tmp_path))
    out = result.stdout
    assert "\x1b[48;5;" in out
    # Alternating backgrounds: consecutive tokens never share one.
    backgrounds = re.findall(r"\x1b\[48;5;(\d+)m", out)
    assert len(backgrounds) == 6 and all(a != b for a, b in zip(backgrounds, backgrounds[1:]))
    assert ANSI.sub("", out) == "aaa·a↵\nb\n"
    # --color never wins over a terminal; NO_COLOR is honoured by auto only.
    assert "\x1b[" not in ok(run("show", "-t", aa_file, "--color", "never", "aa", cwd=tmp_path)).stdout


def test_render_ids_after_the_newline_marker():
    tok = _aa_tokenizer()
    assert render(tok, tok.encode_ordinary("a\n\nb"), color=False, show_ids=True) == "a[97]|↵[10]\n|↵[10]\n|b[98]"
    coloured = render(tok, tok.encode_ordinary("a\nb"), color=True, show_ids=True)
    assert ANSI.sub("", coloured) == "a[97]↵[10]\nb[98]"


def test_file_and_stdin(tmp_path, aa_file):
    f = tmp_path / "t.txt"
    f.write_text("aa b", encoding="utf-8")
    assert ok(run("show", "-t", aa_file, "-f", f, cwd=tmp_path)).stdout == "aa|·|b\n"
    assert ok(run("show", "-t", aa_file, "-f", "-", cwd=tmp_path, stdin="aa")).stdout == "aa\n"


def test_errors(tmp_path, aa_file):
    assert_clean_failure(run("show", "-t", aa_file, cwd=tmp_path), usage=True)
    assert_clean_failure(run("show", "-t", aa_file, "x", "-f", "y", cwd=tmp_path), usage=True)
    line = assert_clean_failure(run("show", "-t", aa_file, "-f", tmp_path / "none.txt", cwd=tmp_path))
    assert "none.txt" in line
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff")
    assert "not valid UTF-8" in assert_clean_failure(run("show", "-t", aa_file, "-f", bad, cwd=tmp_path))


# -- docs/inspect.md's worked numbers -------------------------------------------------


def _documented_counts() -> tuple[list[str], list[tuple[str, list[int]]]]:
    """The table under "Worked numbers" in docs/inspect.md: tokenizer names, and
    per text its counts (the text in backticks, \\n for a newline)."""
    text = (ROOT / "docs" / "inspect.md").read_text(encoding="utf-8")
    section = text.split("### Worked numbers", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    names = [c.strip() for c in rows[0].strip("|").split("|")][1:]
    out = []
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        sample = cells[0].strip("`").replace("\\n", "\n")
        out.append((sample, [int(c.replace(",", "")) for c in cells[1:]]))
    return names, out


def rank_file(name: str) -> str:
    """The OpenAI encoding whose rank file the name ``-t`` takes reads
    (``gpt2``: r50k_base's, the same ranks, pattern and special token; tiktoken
    would build its "gpt2" from GPT-2's original files, which no test has)."""
    from bpe.formats.openai import ENCODINGS
    from bpe.formats.specs import NAMES

    return ENCODINGS[NAMES[name]].file


def test_documented_worked_numbers_are_tiktokens():
    tiktoken = pytest.importorskip("tiktoken")

    names, rows = _documented_counts()
    assert len(rows) >= 4 and "Hello everyone, this is a tokenizer test." in [s for s, _ in rows]
    for name in names:
        require_vocab(rank_file(name))
    for name_index, name in enumerate(names):
        enc = tiktoken.get_encoding(rank_file(name))
        tok = Tokenizer.from_name_or_path(name)
        for sample, counts in rows:
            want = len(enc.encode_ordinary(sample))
            assert tok.encode_ordinary(sample) == enc.encode_ordinary(sample)
            assert counts[name_index] == want, f"docs/inspect.md says {counts[name_index]} {name} tokens for {sample!r}"


def test_documented_show_examples_are_what_bpe_show_prints(tmp_path):
    """Each `$ bpe show ...` line of docs/inspect.md's bpe show section, run,
    prints the line after it."""
    text = (ROOT / "docs" / "inspect.md").read_text(encoding="utf-8")
    section = text.split("## `bpe show`", 1)[1].split("\n#", 1)[0]
    lines = section.splitlines()
    examples = [(lines[k][2:], lines[k + 1]) for k in range(len(lines) - 1) if lines[k].startswith("$ bpe show ")]
    assert len(examples) >= 3
    for command, want in examples:
        args = shlex.split(command)[1:]
        require_vocab(rank_file(args[args.index("-t") + 1]))
        assert ok(run(*args, "-q", cwd=tmp_path)).stdout == want + "\n", command
