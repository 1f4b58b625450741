#!/usr/bin/env bash
# Packs what the many-core measurements need into .devkit/ (ignored by git),
# for a many-core machine reached through a copy of the tree (no network there,
# Python 3.12, about 64 MiB may travel): bpe's release wheel for that Python, gigatoken and
# zstandard wheels, OpenAI's cl100k/o200k rank files, gutenberg100m. Then
# `benchmarks/device_run.sh` runs there (with .devkit/ copied along): the
# 16-thread encode row and the shards section at 1 GB. Results:
# benchmarks/results/many-2026-12-01-device.md is one.
#   PY312=/path/to/python3.12 bash benchmarks/device_kit.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.devkit/' .git/info/exclude || echo '/.devkit/' >> .git/info/exclude
PY312=${PY312:-python3.12}
rm -rf .devkit && mkdir -p .devkit/whl .devkit/vocabs .devkit/corpora/bench
maturin build --release -i "$PY312" --auditwheel skip -o .devkit/whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .devkit/whl gigatoken==0.10.0 awkward==2.14.0 awkward_cpp==57 zstandard
vocabs=$(python3 tests/fetch_vocabs.py | tail -1)
# (tiktoken's cache names: sha1 of each file's URL; cl100k_base and o200k_base)
cp "$vocabs/9b5ad71b2ce5302211f9c61530b329a4922fc6a4" "$vocabs/fb374d419588a4632f3f557e76b4b70aebbca790" .devkit/vocabs/
cp ../shared/corpora/bench/gutenberg100m.txt.xz .devkit/corpora/bench/
du -sh .devkit
