#!/bin/bash
# Interleaved runs at 64 connections: the scoreboard against Redis, a minimal write app (one row put per post, same pipeline),
# and read-only load on the scoreboard. Usage: docs/research/004/floor.sh ROUNDS DATA_DIR > out.txt
set -e
cd "$(dirname "$0")/../../.."
ROUNDS=${1:-3}; DATA=${2:-/tmp/pure-004}
B=target/release/pure-bench
for r in $(seq "$ROUNDS"); do
  echo "### round $r: scoreboard posts, pure-serve and redis"
  $B scoreboard --data "$DATA" --seconds 5 --warmup 1 --connections 64 --vs-redis
  echo "### round $r: minimal app posts (sync always)"
  $B scoreboard --app docs/research/004/minimal --data "$DATA" --seconds 5 --warmup 1 --connections 64
  echo "### round $r: scoreboard reads only"
  $B scoreboard --data "$DATA" --seconds 5 --warmup 1 --connections 64 --read-ratio 1
done
