#!/bin/sh
# Interleaved rounds of the scoreboard over HTTP against Redis: the build before the compiled
# handlers (/tmp/before) and after (/tmp/after), each with its own Redis run in the same round.
# Usage: http.sh ROUNDS DATA_DIR OUT_DIR
set -e
cd "$(dirname "$0")/../../.."   # the repository root: the app is apps/scoreboard
rounds=${1:-3}; data=${2:-/work/benchdata-sb}; out=${3:-.}
for r in $(seq 1 "$rounds"); do
  for build in before after; do
    rm -rf "$data"; mkdir -p "$data"
    /tmp/$build/pure-bench scoreboard --data "$data" --seconds 5 --warmup 1 \
      --connections 1,16,64 --vs-redis > "$out/http-$build-$r.txt" 2>&1
  done
done
