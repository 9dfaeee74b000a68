#!/bin/bash
# G4: --saturation, 5 runs: main, yield (5922b48), keepup (issue 34, third pass).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/main
E="trio"
E="$E,cmd:env PYTHONPATH=/tmp/g/final $PY -P -m executor serve"
E="$E,cmd:env PYTHONPATH=/tmp/g/keepup $PY -P -m executor serve"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --saturation --executors "$E" --runs 5 --no-history --out $OUT/out
