#!/bin/bash
# The reference burst: main, the branch's commit (516a28d: 16 KiB reads, writer nice 5 by default), the same with nice 10, the port.
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-main PYTHONPATH=/tmp/p2/maint $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-new PYTHONPATH=/tmp/p2/newt $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-new10 PYTHONPATH=/tmp/p2/newt10 $PY -P -m executor serve"
E="$E,cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
