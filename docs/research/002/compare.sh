#!/usr/bin/env bash
# Interleaved before/after comparison of pure-serve builds or flags on the scoreboard benchmark.
# Usage: compare.sh ROUNDS "CONNS" NAME='server command' [NAME='server command' ...]
# Each run starts the server fresh (empty data dir under $DATA), waits for its ready line, runs
# pure-bench scoreboard --url against it, and reports posts/s plus server CPU µs per request
# (utime+stime delta from /proc/PID/stat over the bench invocation, divided by the delta of the
# server's own request counter from /_pure/metrics over the same interval).
set -u
ROUNDS=$1; CONNS=$2; shift 2
BENCH=${BENCH:-/tmp/sb/after/pure-bench}
DATA=${DATA:-/work/benchdata-sb/cmp}
PORT=${PORT:-18090}
SECONDS_RUN=${SECONDS_RUN:-5}
TICK=$(getconf CLK_TCK)
cpu() { awk -v t="$TICK" '{print ($14+$15)/t}' "/proc/$1/stat"; }
reqs() { curl -s "http://127.0.0.1:$PORT/_pure/metrics" | awk '/^pure_http_requests_total/ {s+=$2} END {print s+0}'; }
for round in $(seq "$ROUNDS"); do
  for variant in "$@"; do
    name=${variant%%=*}; cmd=${variant#*=}
    for c in $CONNS; do
      rm -rf "$DATA"; mkdir -p "$DATA"
      $cmd --data "$DATA/pure" --listen "127.0.0.1:$PORT" > "$DATA.out" 2>/dev/null &
      pid=$!
      for _ in $(seq 200); do grep -q listening "$DATA.out" 2>/dev/null && break; sleep 0.05; done
      c0=$(cpu $pid); r0=$(reqs)
      line=$($BENCH scoreboard --url "http://127.0.0.1:$PORT" --seconds "$SECONDS_RUN" --warmup 1 --connections "$c" 2>&1 | grep -E '^pure-serve +[0-9]')
      c1=$(cpu $pid); r1=$(reqs)
      kill -TERM $pid; wait $pid 2>/dev/null
      posts=$(echo "$line" | awk '{print $3}'); p50=$(echo "$line" | awk '{print $4}'); p99=$(echo "$line" | awk '{print $6}')
      us=$(awk -v a="$c0" -v b="$c1" -v x="$r0" -v y="$r1" 'BEGIN {printf "%.1f", (b-a)*1e6/((y-x)>0?(y-x):1)}')
      echo "round=$round variant=$name conns=$c posts_s=$posts p50_us=$p50 p99_us=$p99 cpu_us_per_req=$us"
    done
  done
done
