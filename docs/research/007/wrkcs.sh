#!/bin/bash
# pure-serve under wrk (64 conns, 1 thread): per-thread user/sys µs per request and context switches.
# usage: wrkcs.sh [extra pure-serve args]
here=$(dirname "$(readlink -f "$0")")
data=/work/benchdata-sb/wrkcs; port=18303
cd "$here/../../.."   # the repository root
rm -rf $data && mkdir -p $data
${PURE_SERVE:-target/release/pure-serve} apps/scoreboard --data $data --listen 127.0.0.1:$port "$@" > /dev/null 2>&1 &
pid=$!; sleep 1
wrk -t1 -c64 -d1s -s "$here/post.lua" http://127.0.0.1:$port > /dev/null
s() { for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(grep -E '^(voluntary|nonvoluntary)' $t/status | awk '{printf "%s ", $2}') $(awk '{print $14, $15}' $t/stat)"; done | awk '{v[$1]+=$2; n[$1]+=$3; u[$1]+=$4; s[$1]+=$5} END {for (k in v) print k, v[k], n[k], u[k], s[k]}' | sort; }
r0=$(curl -s localhost:$port/_pure/metrics | grep '^pure_writes_total' | awk '{print $2}')
s > /tmp/w0
wrk -t1 -c64 -d5s -s "$here/post.lua" http://127.0.0.1:$port > /tmp/wrk2.out
s > /tmp/w1
r1=$(curl -s localhost:$port/_pure/metrics | grep '^pure_writes_total' | awk '{print $2}')
kill -TERM $pid; wait $pid 2>/dev/null
req=$((r1-r0))
echo "req/s $(grep Requests/sec /tmp/wrk2.out | awk '{print $2}')"
join /tmp/w0 /tmp/w1 | awk -v r=$req '{printf "  %-12s vol %.3f invol %.3f user %.2f sys %.2f\n", $1, ($6-$2)/r, ($7-$3)/r, ($8-$4)*10000/r, ($9-$5)*10000/r; U+=($8-$4); S+=($9-$5)} END {printf "  total user %.2f sys %.2f = %.2f us/req\n", U*10000/r, S*10000/r, (U+S)*10000/r}'
