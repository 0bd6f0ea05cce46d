#!/usr/bin/env bash
# Scoreboard throughput and server CPU per post, this checkout against another build, in
# alternating pairs (both orders, ROUNDS each) so that drift in the machine hits both alike.
#
#   benchmarks/scripts/scoreboard-pairs.sh OLD_PURE_SERVE OLD_APP_DIR [ROUNDS]
#
# Both servers run with --sync none; each round is `pure-bench scoreboard --connections 16
# --seconds 5 --warmup 1`; CPU comes from /proc/PID/stat over the 6 s of load.
set -uo pipefail
cd "$(dirname "$0")/../.."
old_bin=$1 old_app=$2 rounds=${3:-5}
cargo build --release -p pure-serve -p pure-bench >/dev/null 2>&1
old_data=$(mktemp -d) new_data=$(mktemp -d)
"$old_bin" "$old_app" --data "$old_data" --sync none --listen 127.0.0.1:18101 >/dev/null 2>&1 &
old=$!
./target/release/pure-serve apps/scoreboard --data "$new_data" --sync none \
  --listen 127.0.0.1:18102 >/dev/null 2>&1 &
new=$!
trap 'kill $old $new 2>/dev/null; rm -rf "$old_data" "$new_data"' EXIT
for port in 18101 18102; do
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/_pure/health" && break; sleep 0.1; done
done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
for order in "old new" "new old"; do
  for r in $(seq 1 "$rounds"); do
    for side in $order; do
      if [ "$side" = old ]; then pid=$old port=18101; else pid=$new port=18102; fi
      c0=$(cpu $pid)
      line=$(./target/release/pure-bench scoreboard --url "http://127.0.0.1:$port" \
        --connections 16 --seconds 5 --warmup 1 2>&1 | grep '^pure-serve  ')
      c1=$(cpu $pid)
      posts=$(echo "$line" | awk '{print $3}')
      us=$(python3 -c "print(round(($c1 - $c0) / $tck * 1e6 / ($posts * 6), 1))")
      echo "$order round $r $side: $posts posts/s, server CPU ~$us µs/post"
    done
  done
done
