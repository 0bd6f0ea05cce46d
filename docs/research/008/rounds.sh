#!/bin/sh
# Interleaved rounds of `pure-bench scoreboard --vs-redis`, one run per configuration per round.
# usage: rounds.sh ROUNDS OUT_DIR CONNS NAME:BINDIR:ARGS...   e.g.
#   rounds.sh 3 out 1,16,64 "default:/tmp/main:" "one:/tmp/main:--server-threads 1"
# Writes OUT_DIR/NAME-ROUND.txt. DATA=dir (default /work/benchdata-sb/rounds) is emptied first.
rounds=$1; out=$2; conns=$3; shift 3
data=${DATA:-/work/benchdata-sb/rounds}
cd "$(dirname "$0")/../../.."
for r in $(seq 1 "$rounds"); do
  for cfg in "$@"; do
    name=${cfg%%:*}; rest=${cfg#*:}; dir=${rest%%:*}; extra=${rest#*:}
    rm -rf "$data"; mkdir -p "$data"
    # shellcheck disable=SC2086
    "$dir/pure-bench" scoreboard --data "$data" --seconds 5 --warmup 1 --connections "$conns" \
      --vs-redis $extra > "$out/$name-$r.txt" 2>&1
  done
done
