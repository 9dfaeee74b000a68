#!/bin/bash
# C4: the fire-only run of C3 again, the baseline and py only (issue 34, fourth pass).
#   C4.sh OUTDIR
set -e
OUT=$1
PY=/work/main/.venv/bin/python
RUN=/work/main/bench/results/2026-12-06-pauses/run.sh
mkdir -p $OUT
cd /tmp/g/py
PYE="cmd:env PYTHONPATH=/tmp/g/py $PY -P -m executor serve"
MYC="cmd:env PYTHONPATH=/tmp/g/myc $PY -P -m executor serve"
PORT="cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash $RUN $OUT/C4 0 -- $PY -m bench --fire-only --executors "uvloop,$PYE" --runs 3 --fire-real 60 --fire-shadow 60 --fire-bursts 10 --no-history --out $OUT/C4/out
