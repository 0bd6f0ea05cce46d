#!/bin/bash
# The scoreboard on the disk at CONNS connections, one pure-serve build, callers committing lone
# writes (the default) against --lone-writes-on-syncer, PAIRS pairs in alternating order.
#   bash docs/research/024/flag-ab.sh PAIRS CONNS [BINDIR]
pairs=$1; conns=$2; bin=${3:-target/release}
cd "$(dirname "$0")/../../.."
run() {
  rm -rf /work/sb24; mkdir -p /work/sb24
  "$bin/pure-serve" apps/scoreboard --data /work/sb24/pure --listen 127.0.0.1:18080 $1 >/dev/null 2>&1 &
  local pid=$!; sleep 1.5
  "$bin/pure-bench" scoreboard --url http://127.0.0.1:18080 --connections "$conns" --seconds 4 --warmup 1 2>/dev/null \
    | awk '$1=="pure-serve" && $2 ~ /^[0-9]+$/ {print $3, "p50", $4, "p99", $6}'
  kill $pid; wait $pid 2>/dev/null
}
ratios=()
for i in $(seq "$pairs"); do
  if (( i % 2 )); then a=$(run --lone-writes-on-syncer); b=$(run ""); else b=$(run ""); a=$(run --lone-writes-on-syncer); fi
  r=$(echo "$a $b" | awk '{printf "%.3f", $6/$1}')
  echo "pair $i: on-syncer $a | callers $b | ratio $r"
  ratios+=("$r")
done
printf "%s\n" "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio callers/on-syncer:", a[int((NR+1)/2)]}'
rm -rf /work/sb24
