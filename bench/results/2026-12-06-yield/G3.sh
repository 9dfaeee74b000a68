#!/bin/bash
# G3: the reference burst: keepup untraced, main+trace, yield+trace (5922b48), keepup+trace, the port (issue 34, third pass).
set -e
OUT=$1
PY=/work/main/.venv/bin/python
mkdir -p $OUT
cd /tmp/g/maint
E="cmd:env PYTHONPATH=/tmp/g/keepup $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-main PYTHONPATH=/tmp/g/maint $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-yield PYTHONPATH=/tmp/g/finalt $PY -P -m executor serve"
E="$E,cmd:env PAUSE_TRACE=$OUT/ex-keepup PYTHONPATH=/tmp/g/keepupt $PY -P -m executor serve"
E="$E,cmd:/tmp/cpp-port-build/bin/executor_hotpath"
bash /tmp/p2/run.sh $OUT 0 -- $PY -m bench --burst --clients reference-asyncio,reference-uvloop --executors "$E" --runs 3 --seconds 0.2 --no-history --no-components --out $OUT/out
