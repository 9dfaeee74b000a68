#!/bin/bash
# F1: the reference burst: spans (41508ba, --frame-spans), plain (41508ba), the port (issue 34, fourth pass).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/spans
E="cmd:env PYTHONPATH=/tmp/g/spans $PY -P -m executor serve --frame-spans"
E="$E,cmd:env PYTHONPATH=/tmp/g/spans $PY -P -m executor serve"
E="$E,cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash /work/main/bench/results/2026-12-06-pauses/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
