"""`bpe compare`: tokenizers side by side on your corpora, a row per
tokenizer and corpus (or per section of a corpus with section headers).

The formulas are in ``bpe/inspect/metrics.py``; here: reading the corpora, cutting
them into sections, calling the Rust core to encode, and the table, JSON and
plot. Python never loops over the corpus: the core encodes to a numpy array,
and the statistics are numpy operations on it.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from typing import Iterable, Sequence

from bpe.inspect import metrics as metrics
from bpe.tokenizer import Tokenizer

#: A section header: a line `===== <title> =====` whose title holds a
#: `[code]` (`===== UDHR [eng] =====`, `===== FLORES-200 devtest [fra_Latn]
#: sentences 1-750 =====`). The code names the section's row.
HEADER = re.compile(rb"^===== (?=[^\n]*\[([^\]\n]+)\])[^\n]* =====$", re.MULTILINE)

COLUMNS = [  # (key, heading, format)
    ("tokens", "tokens", "{:,}"),
    ("bytes_per_token", "bytes/tok", "{:.3f}"),
    ("chars_per_token", "chars/tok", "{:.3f}"),
    ("tokens_per_word", "tok/word", "{:.3f}"),
    ("vocab_used", "vocab used", "{:.1%}"),
    ("renyi_efficiency", "Rényi eff", "{:.3f}"),
    ("words_3plus", "words 3+", "{:.1%}"),
    ("mb_per_s", "MB/s", "{:.1f}"),
]


def sections(text: bytes, *, split: bool = True) -> list[tuple[str | None, bytes]]:
    """``[(code, text)]``: the sections of a UTF-8 corpus with section headers
    (the header lines left out; text before the first header, if any, is
    ``"(before headers)"``), or ``[(None, text)]`` for one without."""
    heads = list(HEADER.finditer(text)) if split else []
    if not heads:
        return [(None, text)]
    out = []
    if text[: heads[0].start()].strip():
        out.append(("(before headers)", text[: heads[0].start()]))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end() + 1 : end]  # after the header's newline
        out.append((m.group(1).decode("utf-8", errors="replace"), body))
    return out


class _Vocab:
    """What the statistics need from a tokenizer: |V| and each id's byte length."""

    def __init__(self, tok: Tokenizer):
        np = metrics.numpy()
        self.size = len(tok.vocab)  # ordinary tokens; specials are never produced here
        lengths = np.zeros(tok.n_vocab, dtype=np.int64)
        for i, b in tok.vocab.items():  # once per tokenizer, over the vocabulary (not the corpus)
            lengths[i] = len(b)
        self.lengths = lengths


def measure(tok: Tokenizer, data: bytes, *, threads: int | None = 1, vocab: _Vocab | None = None) -> dict:
    """The figures of one row: UTF-8 ``data`` encoded by ``tok`` (special-token
    text counts as ordinary text)."""
    np = metrics.numpy()
    vocab = vocab or _Vocab(tok)
    text = data.decode("utf-8")
    t0 = time.perf_counter()
    ids = tok.encode_to_numpy(text, disallowed_special=(), num_threads=threads)
    seconds = time.perf_counter() - t0
    # A short text is timed again (best of up to 0.2 s): one call of a few
    # milliseconds measures the clock and the first touch of the cache as much
    # as the encoder.
    spent, runs = seconds, 1
    while spent < 0.2 and runs < 50 and seconds < 0.05:
        t0 = time.perf_counter()
        tok.encode_to_numpy(text, disallowed_special=(), num_threads=threads)
        took = time.perf_counter() - t0
        seconds, spent, runs = min(seconds, took), spent + took, runs + 1
    del text
    b = metrics.utf8_array(data)
    starts, ends = metrics.word_spans(b)
    lengths = vocab.lengths[ids]
    per_word = metrics.tokens_per_word(lengths, starts, ends)
    return metrics.row(
        n_bytes=len(data),
        n_chars=metrics.count_chars(b),
        n_words=len(starts),
        counts=np.bincount(ids, minlength=tok.n_vocab),
        per_word=per_word,
        vocab_size=vocab.size,
        seconds=seconds,
    )


def compare_texts(
    tokenizers: dict[str, Tokenizer],
    corpora: Iterable[tuple[str, bytes]],
    *,
    split_sections: bool = True,
    threads: int | None = 1,
) -> list[dict]:
    """Rows for every (corpus name, UTF-8 bytes) and section, every tokenizer:
    ``{"tokenizer", "corpus", "section", <figures>}``."""
    vocabs = {name: _Vocab(tok) for name, tok in tokenizers.items()}
    rows = []
    for corpus, text in corpora:
        for section, body in sections(text, split=split_sections):
            for name, tok in tokenizers.items():
                figures = measure(tok, body, threads=threads, vocab=vocabs[name])
                rows.append({"tokenizer": name, "corpus": corpus, "section": section, **figures})
    return rows


def compare(
    tokenizers: Sequence[str] | dict[str, Tokenizer],
    corpora: Sequence[str | os.PathLike],
    *,
    split_sections: bool = True,
    threads: int | None = 1,
    limit: int | None = None,
) -> list[dict]:
    """`bpe compare` as a call: ``tokenizers`` by spec (``"cl100k"``, a file:
    see ``Tokenizer.from_name_or_path``) or ``{name: Tokenizer}``; ``corpora`` UTF-8 text
    files (``.gz``, ``.xz``, ``.bz2``, ``.zst`` decompressed; ``limit``: only
    the first ``limit`` bytes, cut back to a line end). One row per tokenizer
    and corpus, or per section of a corpus with ``===== ... [code] ... =====``
    header lines."""
    if not isinstance(tokenizers, dict):
        tokenizers = {spec: Tokenizer.from_name_or_path(spec) for spec in tokenizers}
    texts = ((_corpus_name(p), read_corpus(p, limit)) for p in corpora)
    return compare_texts(tokenizers, texts, split_sections=split_sections, threads=threads)


def _corpus_name(path) -> str:
    path = os.fspath(path)
    return "<stdin>" if path == "-" else os.path.basename(path)


def read_corpus(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """A corpus file's bytes (decompressed by its suffix), checked to be UTF-8;
    with ``limit``, its first ``limit`` bytes cut back to the last newline."""
    path = os.fspath(path)
    opener = _opener(path)
    if path == "-":  # standard input
        opener = lambda _p, _m: os.fdopen(os.dup(sys.stdin.fileno()), "rb")  # noqa: E731
    with opener(path, "rb") as f:
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        cut = data.rfind(b"\n", 0, limit) + 1
        if cut == 0:  # no line end: cut at a character boundary
            cut = limit
            while cut > 0 and (data[cut] & 0xC0) == 0x80:
                cut -= 1
        data = data[:cut]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{_corpus_name(path) if path == '-' else path} is not valid UTF-8 at byte offset {e.start} (line {line}); convert it to UTF-8") \
            from None
    return data


def _opener(path: str):
    if path.endswith(".gz"):
        import gzip

        return gzip.open
    if path.endswith(".xz"):
        import lzma

        return lzma.open
    if path.endswith(".bz2"):
        import bz2

        return bz2.open
    if path.endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            raise ImportError(f"{path}: reading .zst needs zstandard: pip install 'bpe[data]'") from None
        return lambda p, mode: zstandard.open(p, mode)
    return open


def _cell(value, fmt: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return fmt.format(value)


def format_table(rows: list[dict]) -> str:
    """A plain-text table, numbers right-aligned."""
    head = ["tokenizer", "corpus", *[h for _, h, _ in COLUMNS]]
    body = [
        [r["tokenizer"], r["corpus"] + (f" [{r['section']}]" if r["section"] else ""),
         *[_cell(r[k], f) for k, _, f in COLUMNS]]
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]

    def line(cells):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def format_markdown(rows: list[dict]) -> str:
    """The table as Markdown (for a README)."""
    head = ["tokenizer", "corpus", *[h for _, h, _ in COLUMNS]]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * len(COLUMNS)]
    for r in rows:
        name = r["corpus"] + (f" [{r['section']}]" if r["section"] else "")
        out.append("| " + " | ".join([r["tokenizer"], name, *[_cell(r[k], f) for k, _, f in COLUMNS]]) + " |")
    return "\n".join(out)


PLOTTED = [("bytes_per_token", "bytes / token (higher: shorter sequences)"),
           ("tokens_per_word", "tokens / word (fertility)"),
           ("renyi_efficiency", "Rényi efficiency (α = 2.5)"),
           ("words_3plus", "share of words in 3+ tokens")]


def plot(rows: list[dict], path: str, *, force: bool = False) -> None:
    """Bar charts of the main figures, a group of bars per corpus (or
    section), a bar per tokenizer; written atomically to ``path`` (PNG, SVG,
    PDF: by its extension)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install 'bpe[plot]'") from None
    from bpe._util.files import atomic_write

    np = metrics.numpy()
    names = list(dict.fromkeys(r["tokenizer"] for r in rows))
    groups = list(dict.fromkeys((r["corpus"], r["section"]) for r in rows))
    by = {(r["tokenizer"], r["corpus"], r["section"]): r for r in rows}
    labels = [s if s else c for c, s in groups]
    fig, axes = plt.subplots(len(PLOTTED), 1, figsize=(max(6.0, 0.35 * len(groups) * len(names) + 2), 3 * len(PLOTTED)),
                             squeeze=False)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(groups))
    for ax, (key, title) in zip(axes[:, 0], PLOTTED):
        for k, name in enumerate(names):
            values = [by.get((name, c, s), {}).get(key, float("nan")) for c, s in groups]
            ax.bar(x + (k - (len(names) - 1) / 2) * width, values, width, label=name)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=90 if len(groups) > 6 else 0, fontsize=8)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    ext = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=ext), force=force)
    finally:
        plt.close(fig)
