#!/bin/sh
# The server's own counters with THP on and off (MIMALLOC_ALLOW_THP=0): 300 batches of 1,000
# entries from batch-split.py (research 017), then pure-serve's user and system CPU, minor
# faults and peak RSS from /proc, and the state's size from /_pure/metrics. ROUNDS of each,
# alternating.
# Run on the build before `no_thp` (commit 38d72a8); after it, both modes are off (and pure-serve turns them off itself).
#   sh docs/research/019/thp-server.sh DISK_DIR ROUNDS     (after cargo build --release)
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-3}
tick=$(getconf CLK_TCK)
one() {
  envs="X=1"
  [ "$1" = off ] && envs="MIMALLOC_ALLOW_THP=0"
  rm -rf "$disk/split"
  env $envs target/release/pure-serve apps/kv --data "$disk/split" --listen 127.0.0.1:8999 \
    > /dev/null 2>&1 &
  pid=$!
  sleep 1
  python3 docs/research/017/batch-split.py > /dev/null
  # /proc/PID/stat: field 10 minflt, 14 utime, 15 stime (clock ticks)
  set -- "$1" $(cut -d' ' -f10,14,15 /proc/$pid/stat)
  hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
  state=$(curl -s 127.0.0.1:8999/_pure/metrics | awk '/^pure_state_bytes / {print $2}')
  kill $pid; wait $pid 2>/dev/null
  echo "thp $1 minflt $2 user_ms $(($3 * 1000 / tick)) sys_ms $(($4 * 1000 / tick)) hwm_kb $hwm state_bytes $state"
}
for round in $(seq "$rounds"); do one on; one off; done
