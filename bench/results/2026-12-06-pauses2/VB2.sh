#!/bin/bash
# The reference burst: main, the branch (d83c2d4: 16 KiB reads, room made before the look, writer nice 5 by default), the same with --writer-priority normal, the port.
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/new2 $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-main PYTHONPATH=/tmp/p2/maint $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-new2 PYTHONPATH=/tmp/p2/new2t $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-new2normal PYTHONPATH=/tmp/p2/new2t $PY -P -m executor serve --writer-priority normal"
E="$E,cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
