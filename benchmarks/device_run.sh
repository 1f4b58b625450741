#!/bin/bash
# On a many-core machine, from the repository root, with .devkit/ made by
# benchmarks/device_kit.sh: the many-thread encode row (this build and
# gigatoken), then the shards section at 1 GB made from gutenberg100m alone.
# Everything goes to $OUT (a folder copied back afterwards). MANY=0 or
# SHARDS=0 skips a part; REPEATS, SHARDS_GB, SHARDS_REPEATS size them.
set -u
REPO=$PWD
PY=$(command -v python3)
export PYTHONUNBUFFERED=1 TIKTOKEN_CACHE_DIR=$REPO/.devkit/vocabs BPE_BENCH_CACHE=/tmp/bench
(nproc; lscpu | head -20; free -g; $PY -V; echo $PY) > $OUT/machine.txt 2>&1
xz -T0 -dc .devkit/corpora/bench/gutenberg100m.txt.xz > /tmp/g100.txt &
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --force-reinstall .devkit/whl/*.whl 2>&1 | grep -v WARNING | tail -3
wait
cd /tmp
$PY -c "import bpe, gigatoken, numpy, tiktoken, zstandard, pyarrow; print('imports ok', bpe.__file__)"
if [ "${MANY:-1}" = 1 ]; then
  $PY $REPO/benchmarks/run.py --only many --corpus /tmp/g100.txt --many-threads 16 --anchors gigatoken \
    --encodings cl100k_base,o200k_base --repeats ${REPEATS:-3} --files-repeats ${REPEATS:-3} \
    --results $OUT/many > $OUT/many.log 2>&1
  grep -E "round|PASS|FAIL" $OUT/many.log | head -40
fi
if [ "${SHARDS:-1}" = 1 ]; then
  BPE_BENCH_SHARD_SOURCES=gutenberg100m timeout ${SHARDS_TIMEOUT:-300} $PY $REPO/benchmarks/run.py --only shards \
    --shards-gb ${SHARDS_GB:-1} --shared $REPO/.devkit/corpora --anchors tiktoken --repeats ${SHARDS_REPEATS:-3} \
    --results $OUT/shards > $OUT/shards.log 2>&1
  grep -E "run [0-9]|PASS|FAIL|wrote|generat" $OUT/shards.log | head -40
fi
