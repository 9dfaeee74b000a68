#!/bin/bash
# --saturation, 5 runs: main, 16 KiB reads without the room made before the look (scratch knob, as S1's cap16), and with it (d83c2d4 --writer-priority normal).
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env P2_CAP=16384 PYTHONPATH=/tmp/p2/var $PY -P -m executor serve"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new2 $PY -P -m executor serve --writer-priority normal"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 5 --no-history --out $OUT/out
