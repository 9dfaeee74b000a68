#!/bin/bash
# Y2: --saturation, 5 runs: main, the branch (yield), the branch with --read-between-batches (issue 34, third pass).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/main
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/g/new $PY -P -m executor serve"
E="$E,cmd:env PYTHONPATH=/tmp/g/new $PY -P -m executor serve --read-between-batches"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 5 --no-history --out $OUT/out
