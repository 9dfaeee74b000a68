#!/bin/bash
# C1-C3: py (9c6c5b1 interpreted) and myc (the same, seven modules compiled by mypyc) (issue 34, fourth pass, H51).
#   C.sh OUTDIR   (runs C1, C2, C3 one after the other into OUTDIR/C1, C2, C3)
set -e
OUT=$1
PY=/work/main/.venv/bin/python
RUN=/work/main/bench/results/2026-12-06-pauses/run.sh
mkdir -p $OUT
cd /tmp/g/py
PYE="cmd:env PYTHONPATH=/tmp/g/py $PY -P -m executor serve"
MYC="cmd:env PYTHONPATH=/tmp/g/myc $PY -P -m executor serve"
PORT="cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash $RUN $OUT/C1 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$PYE,$MYC,$PORT" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/C1/out
bash $RUN $OUT/C2 0 -- $PY -m bench --saturation --executors "$PYE,$MYC,$PORT" --runs 5 --no-history --out $OUT/C2/out
bash $RUN $OUT/C3 0 -- $PY -m bench --fire-only --executors "uvloop,$PYE,$MYC" --runs 3 --fire-real 60 --fire-shadow 60 --fire-bursts 10 --no-history --out $OUT/C3/out
