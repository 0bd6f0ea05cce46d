#!/bin/bash
# A/B: pure-serve default workers vs --threads 1, 64 connections, posts/s and server CPU µs/post.
cd /work/main
for r in 1 2 3; do
  for t in default 1; do
    rm -rf /work/benchdata-sb/t && mkdir -p /work/benchdata-sb/t
    args=""; [ $t = 1 ] && args="--threads 1"
    target/release/pure-serve apps/scoreboard --data /work/benchdata-sb/t --listen 127.0.0.1:18282 $args > /dev/null 2>&1 &
    pid=$!; sleep 1
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    out=$(target/release/pure-bench scoreboard --url http://127.0.0.1:18282 --connections 64 --seconds 5 --warmup 1 2>/dev/null | grep -E "^pure-serve +64")
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    req=$(curl -s localhost:18282/_pure/metrics | grep '^pure_http_requests_total' | awk '{s+=$2} END {print s}')
    kill -TERM $pid; wait $pid 2>/dev/null
    posts=$(echo "$out" | awk '{print $3}')
    echo "round $r threads=$t posts/s=$posts cpu_us_per_req=$(echo "($t1-$t0)*10000/$req" | bc -l | cut -c1-5)"
  done
done
