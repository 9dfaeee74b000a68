#!/bin/bash
# The reference burst: main, main with room made for the look at the buffer's end (scratch), each traced, with and without --read-between-batches.
set -e
OUT=$1
PY=/work/wt/pauses2/.venv/bin/python
mkdir -p $OUT
cd /tmp/p2/bench
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/p2/room $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-main PYTHONPATH=/tmp/p2/maint $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-room PYTHONPATH=/tmp/p2/roomt $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-mainrbb PYTHONPATH=/tmp/p2/maint $PY -P -m executor serve --read-between-batches"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-roomrbb PYTHONPATH=/tmp/p2/roomt $PY -P -m executor serve --read-between-batches"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
