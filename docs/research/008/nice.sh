#!/bin/bash
# Paired runs of pure-serve as built and with its owner and syncer threads reniced to $PRIO
# (negative values need root), 64 connections, `pure-bench scoreboard --url`.
# usage: PRIO=-10 nice.sh PAIRS BINDIR   (DATA=dir, default /work/benchdata-sb/perf, is emptied)
pairs=$1; bin=$2; data=${DATA:-/work/benchdata-sb/perf}
cd "$(dirname "$0")/../../.."
run() {
  rm -rf "$data"
  "$bin/pure-serve" apps/scoreboard --data "$data" --listen 127.0.0.1:8181 >/dev/null 2>&1 &
  pid=$!; sleep 1
  if [ "$1" = nice ]; then
    for t in $(ps -L -p $pid -o tid=,comm= | awk '$2=="pure-owner"||$2=="pure-syncer"{print $1}'); do
      renice -n "$PRIO" -p "$t" >/dev/null
    done
  fi
  "$bin/pure-bench" scoreboard --url http://127.0.0.1:8181 --connections 64 --seconds 4 --warmup 1 2>&1 \
    | awk '$1=="pure-serve" && $2 ~ /^[0-9]+$/ {print $3}'
  kill -TERM $pid; wait $pid 2>/dev/null
}
rs=()
for i in $(seq "$pairs"); do
  if (( i % 2 )); then a=$(run plain); b=$(run nice); else b=$(run nice); a=$(run plain); fi
  r=$(echo "$a $b" | awk '{printf "%.3f", $2/$1}'); echo "pair $i plain $a nice $b ratio $r"; rs+=("$r")
done
printf "%s\n" "${rs[@]}" | sort -n | awk '{a[NR]=$1} END {print "median:", a[int((NR+1)/2)]}'
