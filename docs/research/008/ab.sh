#!/bin/bash
# Paired A/B of two pure-serve builds (or settings) under `pure-bench scoreboard`, alternating the
# order of each pair so that the machine's drift falls on both sides alike.
# usage: ab.sh PAIRS CONNS NAME_A:BINDIR_A:ARGS_A NAME_B:BINDIR_B:ARGS_B
#   BINDIR holds pure-bench and pure-serve (release builds); ARGS go to pure-bench, e.g.
#   "--server-threads 1". EXTRA="--read-ratio 0.9" adds arguments to both. DATA=dir (default
#   /work/benchdata-sb/ab) is emptied before each run.
# Prints per pair: requests/s (posts + reads), server CPU µs per request and p99 µs of posts,
# and B/A of requests/s; then the
# median of the pair ratios.
pairs=$1; conns=$2; A=$3; B=$4
data=${DATA:-/work/benchdata-sb/ab}
cd "$(dirname "$0")/../../.."   # the repository root: the app is apps/scoreboard
run() { local cfg=$1; local rest=${cfg#*:}; local dir=${rest%%:*}; local extra=${rest#*:}
  rm -rf "$data"; mkdir -p "$data"
  # shellcheck disable=SC2086
  "$dir/pure-bench" scoreboard --data "$data" --seconds 4 --warmup 1 --connections "$conns" $extra $EXTRA 2>/dev/null \
    | awk '$1=="pure-serve" && $2 ~ /^[0-9]+$/ {print $3+$9, $(NF-2), "p99", $6}'; }
ratios=()
for i in $(seq "$pairs"); do
  if (( i % 2 )); then a=$(run "$A"); b=$(run "$B"); else b=$(run "$B"); a=$(run "$A"); fi
  r=$(echo "$a $b" | awk '{printf "%.3f", $5/$1}')
  echo "pair $i: ${A%%:*} $a | ${B%%:*} $b | ratio $r"
  ratios+=("$r")
done
printf "%s\n" "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio B/A:", a[int((NR+1)/2)]}'
