#!/bin/bash
# One recorded invocation (2026-12-06, issue 34): load before and after, every process on the
# machine sampled every 2 s (to name a foreign one in a trace), optionally under perf.
#   run.sh OUTDIR PERF(0|1) -- python -m bench ARGS...
out=$1; perf=$2; shift 3
mkdir -p "$out"
uptime > "$out/load.txt"
python3 -c "import time; print(time.time() - time.monotonic())" > "$out/clock_offset.txt"
( while true; do date +%s.%N; ps -eo pid,ppid,stat,etimes,args --no-headers | grep -v "ps -eo" | cut -c1-200; sleep 2; done ) > "$out/ps.txt" 2>&1 &
sampler=$!
if [ "$perf" = 1 ]; then
  perf record -q -a -k CLOCK_MONOTONIC -e sched:sched_switch,sched:sched_waking,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_exit_read,syscalls:sys_exit_recvfrom -o "$out/perf.data" -- env PAUSE_CLIENT="$out/client" "$@" > "$out/printed.txt" 2>&1
else
  env PAUSE_CLIENT="$out/client" "$@" > "$out/printed.txt" 2>&1
fi
echo "rc=$?" >> "$out/load.txt"
kill $sampler
uptime >> "$out/load.txt"
cat "$out/load.txt"
