#!/bin/sh
# Interleaved rounds of the final build with pure-serve's default HTTP threads (one per core)
# and with one, each against its own Redis run. Usage: rounds-threads.sh ROUNDS OUT_DIR [DATA_DIR]
set -e
cd "$(dirname "$0")/../../.."   # the repository root: the app is apps/scoreboard
rounds=${1:-3}; out=${2:-.}; data=${3:-/work/benchdata-sb/rounds}
for r in $(seq 1 "$rounds"); do
  for threads in default 1; do
    args=""; [ $threads = 1 ] && args="--server-threads 1"
    rm -rf "$data"; mkdir -p "$data"
    /tmp/s4/final/pure-bench scoreboard --data "$data" --seconds 5 --warmup 1 \
      --connections 1,16,64 --vs-redis $args > "$out/threads-$threads-$r.txt" 2>&1
  done
done
