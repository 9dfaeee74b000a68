#!/bin/bash
# F2: paced (each ack sent alone): spans (41508ba, --frame-spans), the port (issue 34, fourth pass).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/spans
E="cmd:env PYTHONPATH=/tmp/g/spans $PY -P -m executor serve --frame-spans"
E="$E,cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash /work/main/bench/results/2026-12-06-pauses/run.sh $OUT 0 -- $PY -m bench --clients blocking --executors "$E" --runs 3 --no-history --no-components --out $OUT/out
