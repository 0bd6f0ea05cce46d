#!/usr/bin/env bash
# Instructions per scoreboard post, whole server, under callgrind: a figure that a busy machine
# does not move. Compares this checkout's pure-serve with another build of it.
#
#   benchmarks/scripts/scoreboard-callgrind.sh OLD_PURE_SERVE OLD_APP_DIR
#
# OLD_PURE_SERVE: a pure-serve built at the commit to compare with (a worktree and its own
# CARGO_TARGET_DIR); OLD_APP_DIR: apps/scoreboard as at that commit. Each server runs with
# --sync none under 4 connections of `pure-bench scoreboard` for 20 s; recovery's one-off scan
# of the preallocated log (pure_store::recovery::replay) is left out, and the rest divided by
# the posts the server counted.
set -euo pipefail
cd "$(dirname "$0")/../.."
old_bin=$1 old_app=$2
cargo build --release -p pure-serve -p pure-bench >/dev/null 2>&1
run() {
  local name=$1 bin=$2 app=$3 data out
  data=$(mktemp -d) out=/tmp/scoreboard-callgrind-$name.out
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$app" --data "$data" \
    --sync none --listen 127.0.0.1:18111 >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:18111/_pure/health && break; sleep 1; done
  ./target/release/pure-bench scoreboard --url http://127.0.0.1:18111 --connections 4 \
    --seconds 20 --warmup 1 >/dev/null 2>&1
  local posts
  posts=$(curl -s http://127.0.0.1:18111/_pure/metrics |
    awk '/route="\/scores",status="200"/ {print $2}')
  kill -TERM "$pid"; wait "$pid" || true
  rm -rf "$data"
  callgrind_annotate --inclusive=no "$out" 2>/dev/null | python3 -c "
import re, sys
total = replay = 0
for line in sys.stdin.read().split('Auto-annotated source')[0].splitlines():
    m = re.match(r'\s*([\d,]+) \(', line)
    if not m: continue
    n = int(m.group(1).replace(',', ''))
    if 'PROGRAM TOTALS' in line: total = n
    elif 'recovery::replay' in line and '=>' not in line: replay += n
print('$name: %d posts, %.0f instructions per post' % ($posts, (total - replay) / $posts))"
}
run old "$old_bin" "$old_app"
run new ./target/release/pure-serve apps/scoreboard
