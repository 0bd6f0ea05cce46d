#!/bin/bash
# Context switches of the syncer and owner threads per group, 4 s in the middle of a TPC-C run in
# RAM at TERMINALS terminals (default 64).  bash docs/research/024/switches.sh [TERMINALS] [BINDIR]
t=${1:-64}; bin=${2:-target/release}
cd "$(dirname "$0")/../../.."
rm -rf /dev/shm/p24sw
"$bin/pure-bench" tpcc --engine pure --terminals "$t" --seconds 14 --warmup 3 --dir /dev/shm/p24sw --app apps/tpcc > /tmp/switches-run.txt 2>&1 &
sleep 10
pid=$(pgrep -f "pure-serve.*p24sw" | head -1)
port=$(ss -ltnp | grep "pid=$pid," | head -1 | awk '{print $4}' | sed 's/.*://')
thread() { grep -l "$1" /proc/"$pid"/task/*/comm | head -1 | xargs dirname; }
syncer=$(thread pure-syncer); owner=$(thread pure-owner)
groups() { curl -s "127.0.0.1:$port/_pure/metrics" | awk '$1=="pure_groups_total" {print $2}'; }
ctx() { awk '/ctxt_switches/ {printf "%s ", $2}' "$1/status"; }
g0=$(groups); s0=$(ctx "$syncer"); o0=$(ctx "$owner")
sleep 4
g1=$(groups); s1=$(ctx "$syncer"); o1=$(ctx "$owner")
wait
echo "$g0 $g1 $s0 $s1 $o0 $o1" | awk '{g=$2-$1; printf "groups %d; per group: syncer %.2f voluntary %.2f involuntary; owner %.2f voluntary %.2f involuntary\n", g, ($5-$3)/g, ($6-$4)/g, ($9-$7)/g, ($10-$8)/g}'
grep -E "transactions/s|CPU per|commits/s" /tmp/switches-run.txt | cut -d';' -f1
rm -rf /dev/shm/p24sw
