#!/bin/bash
# G6: --fire-only: yield (5922b48) and keepup, real orders (issue 34, third pass).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/main
E="cmd:env PYTHONPATH=/tmp/g/final $PY -P -m executor serve"
E="$E,cmd:env PYTHONPATH=/tmp/g/keepup $PY -P -m executor serve"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --fire-only --executors "$E" --runs 3 --fire-real 60 --fire-shadow 60 --fire-bursts 10 --no-history --out $OUT/out
