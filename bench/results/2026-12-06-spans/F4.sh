#!/bin/bash
# F4: the reference burst: f4 (f33b3ea) untraced, f4+trace, the port; clients traced (issue 34, fourth pass, H49, H50).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/f4t
E="cmd:env PYTHONPATH=/tmp/g/f4 $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-f4 PYTHONPATH=/tmp/g/f4t $PY -P -m executor serve"
E="$E,cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash /work/main/bench/results/2026-12-06-pauses/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
