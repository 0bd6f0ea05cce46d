#!/bin/sh
# Interleaved rounds of `pure-bench scoreboard --vs-redis` with three builds:
#   old    the load generator with a thread per connection, and the server before this note
#   client the event-loop load generator against that same old server
#   final  the event-loop load generator and the server that cuts groups for an idle syncer
# Each directory holds a pure-bench and the pure-serve it starts (the binary beside it).
# Usage: rounds.sh ROUNDS OUT_DIR [DATA_DIR]; needs /tmp/s4/{old,client,final}.
set -e
cd "$(dirname "$0")/../../.."   # the repository root: the app is apps/scoreboard
rounds=${1:-3}; out=${2:-.}; data=${3:-/work/benchdata-sb/rounds}
for r in $(seq 1 "$rounds"); do
  for build in old client final; do
    conns=64; [ $build = final ] && conns=1,16,64
    rm -rf "$data"; mkdir -p "$data"
    /tmp/s4/$build/pure-bench scoreboard --data "$data" --seconds 5 --warmup 1 \
      --connections $conns --vs-redis > "$out/$build-$r.txt" 2>&1
  done
done
