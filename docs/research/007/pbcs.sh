#!/bin/bash
# pure-serve under pure-bench scoreboard (event-loop client), 64 conns: per-thread user/sys µs per
# request and context switches. usage: pbcs.sh [extra pure-serve args]; PURE_SERVE=path to pick a build.
here=$(dirname "$(readlink -f "$0")")
data=/work/benchdata-sb/pbcs; port=18305
cd "$here/../../.."   # the repository root
rm -rf $data && mkdir -p $data
${PURE_SERVE:-target/release/pure-serve} apps/scoreboard --data $data --listen 127.0.0.1:$port "$@" > /dev/null 2>&1 &
pid=$!; sleep 1
target/release/pure-bench scoreboard --url http://127.0.0.1:$port --connections 64 --seconds 1 --warmup 0 > /dev/null
s() { for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(grep -E '^(voluntary|nonvoluntary)' $t/status | awk '{printf "%s ", $2}') $(awk '{print $14, $15}' $t/stat)"; done | awk '{v[$1]+=$2; n[$1]+=$3; u[$1]+=$4; s[$1]+=$5} END {for (k in v) print k, v[k], n[k], u[k], s[k]}' | sort; }
r0=$(curl -s localhost:$port/_pure/metrics | grep '^pure_writes_total' | awk '{print $2}')
s > /tmp/p0
out=$(target/release/pure-bench scoreboard --url http://127.0.0.1:$port --connections 64 --seconds 5 --warmup 0 | grep -E "^pure-serve +64")
s > /tmp/p1
r1=$(curl -s localhost:$port/_pure/metrics | grep '^pure_writes_total' | awk '{print $2}')
kill -TERM $pid; wait $pid 2>/dev/null
req=$((r1-r0))
echo "$out" | awk '{print "posts/s", $3, "p50", $4, "p99", $6, "client_us", $13}'
join /tmp/p0 /tmp/p1 | awk -v r=$req '{printf "  %-12s vol %.3f invol %.3f user %.2f sys %.2f\n", $1, ($6-$2)/r, ($7-$3)/r, ($8-$4)*10000/r, ($9-$5)*10000/r; U+=($8-$4); S+=($9-$5)} END {printf "  total user %.2f sys %.2f = %.2f us/req\n", U*10000/r, S*10000/r, (U+S)*10000/r}'
