#!/bin/bash
# pauses.txt, summary_pauses.txt, table.txt of a P-style run ($1 = OUT, $2 = executors named)
OUT=$1; N=$2
R=/work/wt/pauses2/bench/results/2026-12-06-pauses2
cd $OUT
python3 ${PAUSES:-/tmp/p2/pauses.py} $OUT > $OUT/pauses.txt
python3 $R/summary_nosched.py $OUT $N 2 3 > $OUT/summary_pauses.txt
python3 /tmp/p2/table.py $OUT/summary_pauses.txt > $OUT/table.txt
cat $OUT/table.txt
