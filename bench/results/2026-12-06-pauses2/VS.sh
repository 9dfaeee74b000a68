#!/bin/bash
# --saturation: main, the branch's commit (516a28d), the same with nice 10; 5 runs.
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new $PY -P -m executor serve"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new10 $PY -P -m executor serve"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 5 --no-history --out $OUT/out
