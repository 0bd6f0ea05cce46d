#!/bin/sh
# System calls and context switches per post, per pure-serve thread, at 64 connections: perf stat
# of syscall tracepoints for 3 s in the middle of an 8 s `pure-bench scoreboard --url` load.
# usage: syscalls.sh BINDIR [pure-serve args...]   (needs perf; DATA=dir, default
# /work/benchdata-sb/perf, is emptied first; pure-serve listens on 127.0.0.1:8181)
bin=$1; shift
data=${DATA:-/work/benchdata-sb/perf}
out=$(mktemp -d)
cd "$(dirname "$0")/../../.."
rm -rf "$data"
"$bin/pure-serve" apps/scoreboard --data "$data" --listen 127.0.0.1:8181 "$@" >"$out/serve.log" 2>&1 &
pid=$!
sleep 1.5
"$bin/pure-bench" scoreboard --url http://127.0.0.1:8181 --connections 64 --seconds 8 --warmup 1 >"$out/load.txt" 2>&1 &
sleep 3
writes() { curl -s localhost:8181/_pure/metrics | awk '$1=="pure_writes_total" {print $2}'; }
a=$(writes)
perf stat --per-thread -e syscalls:sys_enter_futex,syscalls:sys_enter_writev,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_write,syscalls:sys_enter_fdatasync,sched:sched_switch,task-clock -p $pid -o "$out/stat.txt" -- sleep 3
b=$(writes)
sleep 5
kill -TERM $pid; wait $pid
posts=$((b-a))
echo "posts in 3 s: $posts"
grep -E "pure-" "$out/stat.txt" | awk -v p=$posts '{gsub(",","",$2); printf "%-16s %-32s %8.3f\n", $1, $3, $2/p}' | sort | grep -v " 0.000$"
rm -rf "$out"
