#!/bin/bash
# The reference burst, main and the variants traced (second pass, issue 34).
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-main PYTHONPATH=/tmp/p2/maint $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-cap16 P2_CAP=16384 PYTHONPATH=/tmp/p2/vart $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-cap32 P2_CAP=32768 PYTHONPATH=/tmp/p2/vart $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-gate P2_GATE_NS=500000 PYTHONPATH=/tmp/p2/vart $PY -P -m executor serve --read-between-batches"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-nice5 P2_NICE=5 PYTHONPATH=/tmp/p2/vart $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-nice10 P2_NICE=10 PYTHONPATH=/tmp/p2/vart $PY -P -m executor serve"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
