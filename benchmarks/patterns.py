"""Split-pattern speeds, one timing per process (docs/dev/patterns.md).

    taskset -c 1 python benchmarks/patterns.py TEXT MODE PATTERN [DIGITS]

TEXT: a UTF-8 file (the notes use the first 10 MB of
shared/corpora/bench/enwiki2015_extract100m.txt.xz). MODE: ``encode`` (PATTERN is
an encoding name: ``encode_ordinary`` of the whole text), ``count``
(``bpe.count(text, pattern=PATTERN, digits=DIGITS)``) or ``wrapped`` (the same
count with each regex of the pattern wrapped in ``(?:...)``, which the core does
not recognise: fancy-regex instead of the hand-written lexers).
"""

import sys
import time

import bpe
from bpe import _core
from bpe._util.patterns import pattern_steps


def main(path: str, mode: str, pattern: str, digits: str | None = None) -> None:
    text = open(path, encoding="utf-8").read()
    if mode == "encode":
        enc = bpe.get_encoding(pattern)
        enc.encode_ordinary(text[:100_000])  # loads the vocabulary
        start = time.perf_counter()
        enc.encode_ordinary(text)
    else:
        if mode == "wrapped":
            steps = [f"(?:{s})" for s in pattern_steps(bpe.resolve_pattern(pattern, digits))]
            pattern, digits = _core.Pretokenizer.sequence(steps).pattern, None
        start = time.perf_counter()
        bpe.count(text, pattern=pattern, digits=digits, progress=False)
    seconds = time.perf_counter() - start
    print(f"{mode} {pattern[:40]} {digits or ''} {len(text.encode()) / seconds / 1e6:.1f} MB/s")


if __name__ == "__main__":
    main(*sys.argv[1:])
