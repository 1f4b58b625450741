"""The numbers of `bpe compare`, as formulas over arrays (numpy).

Every figure of a row is computed here from the text and its token ids;
encoding itself happens in the Rust core (``bpe/inspect/compare.py`` calls it). The
definitions, also in docs/inspect.md#bpe-compare:

- **word**: a maximal run of characters that are not Unicode ``White_Space``
  (the 25 code points below; what ``str.split()`` splits on, except that
  ``str.split`` also splits on U+001C..U+001F, which are not ``White_Space``).
- **bytes/token**: UTF-8 bytes of the text / tokens. **characters/token**:
  code points / tokens. **tokens/word** (fertility): tokens / words.
- **vocabulary used**: distinct ids produced / |V|, where |V| is the number
  of ordinary tokens (the byte tokens and the merges; special tokens are left
  out, since encoding text never produces them).
- **Rényi efficiency** (Zouhar et al., "Tokenization and the Noiseless
  Channel", ACL 2023, https://aclanthology.org/2023.acl-long.284/):
  ``H_a(p) / log |V|`` with ``H_a(p) = log(sum_t p(t)**a) / (1 - a)``, ``p``
  the unigram distribution of the ids produced (count / total), ``a = 2.5``
  (the order the paper found to predict BLEU best). The base of the
  logarithms cancels. (Their ``tokenization-scorer`` package divides by the
  log of the number of *observed* types unless told the vocabulary size; we
  use the vocabulary size, as the paper's definition does.)
- **words split in 3+**: the share of words whose bytes overlap three or
  more tokens of the encoding of the whole text (a token that straddles a
  word's edge, like a leading space, counts for the word it reaches into).
"""

from __future__ import annotations

import math

#: Unicode White_Space (PropList.txt): the characters that separate words.
WHITE_SPACE = (
    [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)

RENYI_ALPHA = 2.5


def numpy():
    try:
        import numpy as np
    except ImportError:
        raise ImportError("this command needs numpy: pip install 'bpe[model]' (or: pip install numpy)") from None
    return np


def utf8_array(data: bytes):
    np = numpy()
    return np.frombuffer(data, dtype=np.uint8)


def count_chars(b) -> int:
    """Code points in UTF-8 bytes ``b`` (a uint8 array): the bytes that are
    not continuation bytes (10xxxxxx)."""
    np = numpy()
    return int(np.count_nonzero((b & 0xC0) != 0x80))


#: White_Space beyond ASCII, as UTF-8 sequences.
_WIDE_SPACE = [chr(c).encode("utf-8") for c in WHITE_SPACE if c >= 0x80]


def space_mask(b):
    """For UTF-8 bytes ``b`` (a uint8 array), which bytes belong to a
    White_Space character. Works on bytes (no array of code points, which
    is four times the text's size)."""
    np = numpy()
    space = np.isin(b, np.array([c for c in WHITE_SPACE if c < 0x80], dtype=np.uint8))
    n = len(b)
    for seq in _WIDE_SPACE:
        k = len(seq)
        if n < k:
            continue
        hit = np.ones(n - k + 1, dtype=bool)
        for j, byte in enumerate(seq):
            hit &= b[j : n - k + 1 + j] == byte
        for j in range(k):
            space[j : n - k + 1 + j] |= hit
    return space


def word_spans(b):
    """(starts, ends): byte offsets of each word in UTF-8 bytes ``b`` (a
    uint8 array); a word is a maximal run of non-White_Space characters."""
    np = numpy()
    word = ~space_mask(b)
    edges = np.diff(np.concatenate(([False], word, [False])).astype(np.int8))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def tokens_per_word(token_lengths, starts, ends):
    """For each word [start, end) (byte offsets), how many tokens overlap it,
    the tokens lying end to end with the byte lengths ``token_lengths``."""
    np = numpy()
    tok_end = np.cumsum(token_lengths)
    tok_start = tok_end - token_lengths
    first = np.searchsorted(tok_end, starts, side="right")  # first token ending after the word's start
    past = np.searchsorted(tok_start, ends, side="left")  # first token starting at or after its end
    return past - first


def renyi_entropy(counts, alpha: float = RENYI_ALPHA) -> float:
    """H_alpha of the distribution ``counts / counts.sum()`` in nats (alpha != 1)."""
    np = numpy()
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total == 0:
        return float("nan")
    p = counts[counts > 0] / total
    return float(math.log(np.sum(p**alpha)) / (1 - alpha)) + 0.0  # + 0.0: one type gives 0.0, not -0.0


def renyi_efficiency(counts, vocab_size: int, alpha: float = RENYI_ALPHA) -> float:
    """Zouhar et al. (2023): H_alpha(p) / log |V|."""
    if vocab_size < 2:
        return float("nan")
    return renyi_entropy(counts, alpha) / math.log(vocab_size)


def row(*, n_bytes: int, n_chars: int, n_words: int, counts, per_word, vocab_size: int, seconds: float) -> dict:
    """The figures of one row of `bpe compare` from the raw quantities:
    ``counts`` (numpy.bincount of the ids), ``per_word`` (tokens_per_word)."""
    np = numpy()
    n_tokens = int(counts.sum())

    def ratio(a, b):
        return a / b if b else float("nan")

    return {
        "bytes": n_bytes,
        "characters": n_chars,
        "words": n_words,
        "tokens": n_tokens,
        "bytes_per_token": ratio(n_bytes, n_tokens),
        "chars_per_token": ratio(n_chars, n_tokens),
        "tokens_per_word": ratio(n_tokens, n_words),
        "vocab_used": ratio(int(np.count_nonzero(counts)), vocab_size),
        "renyi_efficiency": renyi_efficiency(counts, vocab_size),
        "words_3plus": ratio(int(np.count_nonzero(per_word >= 3)), n_words),
        "mb_per_s": ratio(n_bytes / 1e6, seconds),
        "seconds": seconds,
    }
