"""`bpe compare` and the formulas of bpe/inspect/metrics.py: hand-computed examples,
properties on arbitrary text, and an independent computation with tiktoken
and plain Python on the multilingual corpus."""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter

import pytest
from conftest import CORPORA, require_vocab, shared_file
from hypothesis import given
from hypothesis import strategies as st
from helpers import assert_clean_failure, ok, run

np = pytest.importorskip("numpy", reason="bpe compare needs numpy (the model extra)")

from bpe import Tokenizer  # noqa: E402
from bpe.inspect import metrics  # noqa: E402
from bpe.inspect.compare import compare, compare_texts, format_markdown, format_table, read_corpus, sections  # noqa: E402

MULTILINGUAL = CORPORA / "multilingual_udhr.txt"


def arr(data: bytes):
    return metrics.utf8_array(data)


# -- the formulas, by hand ---------------------------------------------------------


def test_word_spans_by_hand():
    # "ab  c\u3000d\n": bytes a=0 b=1, spaces 2-3, c=4, U+3000 is 3 bytes (5-7), d=8, \n=9.
    # Words: "ab" [0,2), "c" [4,5), "d" [8,9).
    starts, ends = metrics.word_spans(arr("ab  c\u3000d\n".encode()))
    assert starts.tolist() == [0, 4, 8]
    assert ends.tolist() == [2, 5, 9]
    # No-break space (U+00A0, 2 bytes) separates words; U+200B (zero width
    # space) is not White_Space: "x\u200by" is one word.
    assert len(metrics.word_spans(arr("a\u00a0b x\u200by".encode()))[0]) == 3
    assert len(metrics.word_spans(arr(b""))[0]) == 0
    assert len(metrics.word_spans(arr(b" \n\t "))[0]) == 0


@given(st.text())
def test_words_are_what_str_split_finds(text):
    # str.split() splits on White_Space and on U+001C..U+001F (which are not White_Space).
    text = re.sub("[\x1c-\x1f]", "x", text)
    data = text.encode("utf-8", errors="replace")
    starts, ends = metrics.word_spans(arr(data))
    words = [data[s:e].decode("utf-8", errors="replace") for s, e in zip(starts, ends)]
    assert words == data.decode("utf-8", errors="replace").split()
    assert metrics.count_chars(arr(data)) == len(data.decode("utf-8", errors="replace"))


def test_tokens_per_word_by_hand():
    # Tokens of 1, 2 and 3 bytes lie at [0,1), [1,3), [3,6).
    lengths = np.array([1, 2, 3])
    # [0,2) overlaps tokens 0 and 1; [3,6) token 2 only; [2,4) tokens 1 and 2; [1,3) token 1.
    got = metrics.tokens_per_word(lengths, np.array([0, 3, 2, 1]), np.array([2, 6, 4, 3]))
    assert got.tolist() == [2, 1, 2, 1]


def test_renyi_by_hand():
    # Two tokens seen once each: p = (1/2, 1/2), sum p^2.5 = 2 * 2^-2.5 = 2^-1.5,
    # H = ln(2^-1.5) / (1 - 2.5) = ln 2. Over |V| = 4: ln 2 / ln 4 = 0.5.
    assert metrics.renyi_entropy([1, 1]) == pytest.approx(math.log(2))
    assert metrics.renyi_efficiency([1, 1, 0, 0], 4) == pytest.approx(0.5)
    # Uniform over the whole vocabulary: H = ln |V|, efficiency 1.
    assert metrics.renyi_efficiency([5] * 8, 8) == pytest.approx(1.0)
    # p = (3/4, 1/4): sum p^2.5 = 0.75^2.5 + 0.25^2.5 = 0.5625 * 0.866025 + 0.03125 = 0.518389;
    # H = ln(0.518389) / -1.5 = -0.657029 / -1.5 = 0.438019 nats.
    assert metrics.renyi_entropy([3, 1]) == pytest.approx(0.438019, abs=1e-6)
    # One token only: H = 0.
    assert metrics.renyi_entropy([7, 0]) == pytest.approx(0.0)


def _aa_tokenizer() -> Tokenizer:
    # Bytes, plus one merge: "a" + "a" -> 256. GPT-2's split pattern.
    return Tokenizer([(97, 97)], "gpt2", {})


def test_row_by_hand():
    tok = _aa_tokenizer()
    # "aaa aa\n" splits into "aaa", " aa", "\n": [256, 97] [32, 256] [10] -> 5 tokens
    # (256 twice, 97, 32, 10 once each). 7 bytes, 7 characters, 2 words.
    # Words: "aaa" = bytes [0,3) overlaps tokens [0,2) and [2,3): 2 tokens;
    # "aa" = [4,6) is token 256 alone: 1 token. No word of 3+ tokens.
    # |V| = 257 (256 bytes + 1 merge). Distinct ids 4 -> 4/257.
    # p = (2/5, 1/5, 1/5, 1/5): sum p^2.5 = 0.4^2.5 + 3 * 0.2^2.5 = 0.101193 + 0.053666 = 0.154859,
    # H = ln(0.154859) / -1.5 = -1.865243 / -1.5 = 1.243496, efficiency 1.243496 / ln 257 (5.549076) = 0.224091.
    [r] = compare_texts({"aa": tok}, [("t", b"aaa aa\n")])
    assert (r["bytes"], r["characters"], r["words"], r["tokens"]) == (7, 7, 2, 5)
    assert r["bytes_per_token"] == pytest.approx(7 / 5)
    assert r["chars_per_token"] == pytest.approx(7 / 5)
    assert r["tokens_per_word"] == pytest.approx(5 / 2)
    assert r["vocab_used"] == pytest.approx(4 / 257)
    assert r["renyi_efficiency"] == pytest.approx(0.224091, abs=1e-6)
    assert r["words_3plus"] == 0.0
    # "aaaaa é" splits into "aaaaa", " é": [256, 256, 97] and the bytes 20 C3 A9 (no merge
    # holds them): 6 tokens, 7 characters, 8 bytes. "aaaaa" overlaps 3 tokens; "é" (bytes
    # [6,8)) the two byte tokens C3, A9 (the space token [5,6) stops before it): 1 word of 2.
    [r] = compare_texts({"aa": tok}, [("t", "aaaaa é".encode())])
    assert (r["tokens"], r["words"], r["characters"], r["bytes"]) == (6, 2, 7, 8)
    assert r["words_3plus"] == pytest.approx(1 / 2)
    assert r["mb_per_s"] > 0


def test_empty_text_gives_undefined_not_a_crash():
    [r] = compare_texts({"aa": _aa_tokenizer()}, [("empty", b"")])
    assert r["tokens"] == 0 and math.isnan(r["bytes_per_token"]) and math.isnan(r["renyi_efficiency"])
    assert " - " in format_table([r])


def test_sections():
    text = b"intro\n===== UDHR [eng] =====\nHello\n===== not a section header =====\n===== X [fr_Latn] y =====\nSalut\n"
    got = sections(text)
    assert got == [("(before headers)", b"intro\n"), ("eng", b"Hello\n===== not a section header =====\n"),
                   ("fr_Latn", b"Salut\n")]
    assert sections(text, split=False) == [(None, text)]
    assert sections(b"plain text\n") == [(None, b"plain text\n")]


def test_read_corpus_limit_and_compression(tmp_path):
    import lzma

    p = tmp_path / "c.txt.xz"
    p.write_bytes(lzma.compress("line one\nline two\nétoile".encode()))
    assert read_corpus(p) == "line one\nline two\nétoile".encode()
    assert read_corpus(p, limit=12) == b"line one\n"  # cut back to a line end
    q = tmp_path / "one.txt"
    q.write_bytes("ééé".encode())
    assert read_corpus(q, limit=3) == "é".encode()  # never inside a character


# -- against tiktoken and plain Python -------------------------------------------------


WHITE_SPACE = {chr(c) for c in metrics.WHITE_SPACE}


def _by_hand(enc, text: str, vocab_size: int) -> dict:
    """The figures of a row from tiktoken's ids, in plain Python."""
    ids = enc.encode_ordinary(text)
    data = text.encode("utf-8")
    # Token byte spans, one after the other.
    spans, at = [], 0
    for i in ids:
        n = len(enc.decode_single_token_bytes(i))
        spans.append((at, at + n))
        at += n
    assert at == len(data)
    # Words as byte spans: walk the characters.
    words, start, pos = [], None, 0
    for ch in text:
        size = len(ch.encode("utf-8"))
        if ch in WHITE_SPACE:
            if start is not None:
                words.append((start, pos))
                start = None
        elif start is None:
            start = pos
        pos += size
    if start is not None:
        words.append((start, pos))
    # Tokens overlapping each word (both lists are sorted: one pass).
    per_word, k = [], 0
    for s, e in words:
        while spans[k][1] <= s:
            k += 1
        j = k
        while j < len(spans) and spans[j][0] < e:
            j += 1
        per_word.append(j - k)
    counts = Counter(ids)
    total = len(ids)
    h = math.log(sum((c / total) ** 2.5 for c in counts.values())) / (1 - 2.5)
    return {
        "tokens": total, "bytes": len(data), "characters": len(text), "words": len(words),
        "bytes_per_token": len(data) / total, "chars_per_token": len(text) / total,
        "tokens_per_word": total / len(words), "vocab_used": len(counts) / vocab_size,
        "renyi_efficiency": h / math.log(vocab_size),
        "words_3plus": sum(1 for n in per_word if n >= 3) / len(words),
    }


def _sections_by_hand(text: str) -> list[tuple[str, str]]:
    """The sections, found without the module's regex: a header is a line that
    starts and ends with ``=====`` and holds ``[code]`` (the corpora's READMEs)."""
    parts, code, lines = [], None, []
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\n")
        if bare.startswith("=====") and bare.endswith("=====") and "[" in bare and "]" in bare:
            if code is not None:
                parts.append((code, "".join(lines)))
            code, lines = bare[bare.index("[") + 1:bare.index("]")], []
        else:
            lines.append(line)
    parts.append((code, "".join(lines)))
    return parts


def _check_against_tiktoken(path, limit=None) -> int:
    """``compare`` of cl100k and o200k on ``path`` equals, row for row and figure
    for figure, what plain Python computes from tiktoken's own ids. Returns the
    number of sections."""
    tiktoken = pytest.importorskip("tiktoken")
    for name in ("cl100k_base", "o200k_base"):
        require_vocab(name)
    rows = compare(["cl100k", "o200k"], [path], limit=limit)
    parts = _sections_by_hand(read_corpus(path, limit).decode("utf-8"))
    assert [(r["section"], r["tokenizer"]) for r in rows] == [(c, t) for c, _ in parts for t in ("cl100k", "o200k")]
    encodings = {"cl100k": tiktoken.get_encoding("cl100k_base"), "o200k": tiktoken.get_encoding("o200k_base")}
    for row, (code, body) in zip(rows, [p for p in parts for _ in (0, 1)]):
        enc = encodings[row["tokenizer"]]
        # |V|: the ordinary tokens (cl100k's ids have a gap before its special tokens).
        want = _by_hand(enc, body, vocab_size=len(enc._mergeable_ranks))
        for key, value in want.items():
            assert row[key] == pytest.approx(value, rel=1e-12), (code, row["tokenizer"], key)
    return len(parts)


def test_compare_matches_tiktoken_on_the_multilingual_corpus():
    assert _check_against_tiktoken(MULTILINGUAL) == 49


def test_compare_matches_tiktoken_on_flores200():
    # The shared FLORES-200 devtest (184 languages, 27 MB): its first 4 MB, cut
    # at a line end by compare's own --limit, are the first ~25 languages.
    path = shared_file("mid/flores200_devtest_184langs.txt.xz")
    assert _check_against_tiktoken(path, limit=4_000_000) >= 20


# -- the command ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def aa_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "aa.bpe"
    _aa_tokenizer().save(path)
    return path


def test_cli_table_json_markdown(tmp_path, aa_file):
    corpus = tmp_path / "c.txt"
    corpus.write_text("===== T [one] =====\naaa aa\n===== T [two] =====\naaaaa é\n", encoding="utf-8")
    table = ok(run("compare", aa_file, "--corpus", corpus, cwd=tmp_path)).stdout
    assert "c.txt [one]" in table and "c.txt [two]" in table and "Rényi eff" in table
    rows = json.loads(ok(run("compare", aa_file, "--corpus", corpus, "--json", cwd=tmp_path)).stdout)
    assert [(r["tokenizer"], r["section"], r["tokens"]) for r in rows] == [("aa.bpe", "one", 5), ("aa.bpe", "two", 7)]
    assert rows == json.loads(json.dumps(rows))  # plain JSON: no NaN
    rows = json.loads(ok(run("compare", aa_file, "--corpus", "-", "--json", cwd=tmp_path, stdin="aaa aa\n")).stdout)
    assert [(r["corpus"], r["tokens"]) for r in rows] == [("<stdin>", 5)]
    md = ok(run("compare", aa_file, "--corpus", corpus, "--markdown", "--no-sections", cwd=tmp_path)).stdout
    assert md.splitlines()[0].startswith("| tokenizer | corpus |") and md.count("\n") == 3
    one = format_markdown(compare_texts({"x": _aa_tokenizer()}, [("c", b"a")])).splitlines()
    assert len(one) == 3 and one[2].startswith("| x | c | 1 | 1.000 |")
    assert "| 0.000 |" in one[2]  # one token type: H = 0, shown without a minus sign


def test_cli_errors(tmp_path, aa_file):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    # In Python a ValueError (the command line makes it its one error line).
    with pytest.raises(ValueError, match=r"bad\.txt is not valid UTF-8 at byte offset 3 \(line 2\)"):
        compare({"aa": _aa_tokenizer()}, [bad])
    line = assert_clean_failure(run("compare", aa_file, "--corpus", bad, cwd=tmp_path))
    assert "not valid UTF-8 at byte offset 3 (line 2)" in line
    line = assert_clean_failure(run("compare", aa_file, "--corpus", tmp_path / "none.txt", cwd=tmp_path))
    assert "none.txt" in line
    assert_clean_failure(run("compare", aa_file, cwd=tmp_path), usage=True)
    assert_clean_failure(run("compare", aa_file, aa_file, "--corpus", bad, cwd=tmp_path), usage=True)
    assert_clean_failure(run("compare", "no-such.bpe", "--corpus", bad, cwd=tmp_path))


def test_plot(tmp_path, aa_file):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (the plot extra)")
    corpus = tmp_path / "c.txt"
    corpus.write_text("aaa aa\n", encoding="utf-8")
    ok(run("compare", aa_file, "--corpus", corpus, "--plot", tmp_path / "out.png", cwd=tmp_path))
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_one_line(tmp_path, aa_file):
    corpus = tmp_path / "c.txt"
    corpus.write_text("aaa aa\n", encoding="utf-8")
    # matplotlib made unimportable in the child (None in sys.modules stops an import).
    code = ("import sys; sys.modules['matplotlib'] = None; from bpe.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    result = run("compare", aa_file, "--corpus", corpus, "--plot", tmp_path / "out.png", cwd=tmp_path,
                 exe=[sys.executable, "-c", code])
    line = assert_clean_failure(result)
    assert "pip install 'bpe[plot]'" in line
    assert not (tmp_path / "out.png").exists()
