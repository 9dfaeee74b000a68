#!/bin/bash
# --saturation, main and the variants untraced (second pass, issue 34).
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/var $PY -P -m executor serve --read-between-batches"
E="$E,cmd:env P2_CAP=16384 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve"
E="$E,cmd:env P2_CAP=32768 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve"
E="$E,cmd:env P2_GATE_NS=500000 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve --read-between-batches"
E="$E,cmd:env P2_NICE=5 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve"
E="$E,cmd:env P2_NICE=10 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 3 --no-history --out $OUT/out
