#!/bin/bash
# Third-party load generators, same 64 connections: wrk against pure-serve, redis-benchmark
# (EVALSHA of pure-bench's script) against redis-server with appendfsync always. Both on the
# same directory. Prints requests/s and server CPU µs per request, and the client's CPU.
# usage: third.sh [SECONDS] [CONNS] [WRK_THREADS]
here=$(dirname "$(readlink -f "$0")")
secs=${1:-5}; conns=${2:-64}; wt=${3:-1}
data=/work/benchdata-sb/third
cd "$here/../../.."   # the repository root
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
# pure-serve + wrk
rm -rf $data && mkdir -p $data/pure $data/redis
target/release/pure-serve apps/scoreboard --data $data/pure --listen 127.0.0.1:18301 > /dev/null 2>&1 &
pid=$!; sleep 1
wrk -t$wt -c$conns -d1s -s "$here/post.lua" http://127.0.0.1:18301 > /dev/null
c0=$(cpu $pid)
wrk -t$wt -c$conns -d${secs}s -s "$here/post.lua" --latency http://127.0.0.1:18301 > /tmp/wrk.out &
wp=$!; sleep 0.5; w0=$(cpu $wp); sleep $((secs-1)); w1=$(cpu $wp); wait $wp
c1=$(cpu $pid)
kill -TERM $pid; wait $pid 2>/dev/null
rps=$(grep "Requests/sec" /tmp/wrk.out | awk '{print $2}')
p50=$(grep -E "^ +50%" /tmp/wrk.out | awk '{print $2}'); p99=$(grep -E "^ +99%" /tmp/wrk.out | awk '{print $2}')
non2xx=$(grep -c "Non-2xx" /tmp/wrk.out)
echo "pure-serve+wrk   req/s $rps p50 $p50 p99 $p99 server_cpu_us/req $(echo "($c1-$c0)*10000/($rps*$secs)" | bc -l | cut -c1-5) client_cpu_us/req $(echo "($w1-$w0)*10000/($rps*($secs-1.5))" | bc -l | cut -c1-5) non2xx=$non2xx"
# redis + redis-benchmark
redis-server --port 18302 --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always --daemonize no --dir $data/redis > /dev/null 2>&1 &
rp=$!; sleep 0.5
sha=$(redis-cli -p 18302 SCRIPT LOAD "$(sed -n '/^local posts/,/^return/p' benchmarks/src/scoreboard/redis.rs)")
n=$(( 50000 * secs ))
redis-benchmark -p 18302 -c $conns -n 30000 -r 10000 EVALSHA $sha 2 player:__rand_int__ leaderboard __rand_int__ __rand_int__ > /dev/null 2>&1
c0=$(cpu $rp)
redis-benchmark -p 18302 -c $conns -n $n -r 10000 EVALSHA $sha 2 player:__rand_int__ leaderboard __rand_int__ __rand_int__ > /tmp/rb.out 2>&1 &
bp=$!; sleep 0.5; b0=$(cpu $bp); sleep 2; b1=$(cpu $bp); sleep 0.2; rc0=$(cpu $rp); t0=$(date +%s.%N); wait $bp; c1=$(cpu $rp)
rps=$(grep -E "throughput summary" /tmp/rb.out | awk '{print $3}')
lat=$(grep -A2 "latency summary" /tmp/rb.out | tail -1 | awk '{print "p50", $3*1000, "p99", $5*1000}')
kill $rp; wait $rp 2>/dev/null
total=$(grep -E "requests completed in" /tmp/rb.out | awk '{print $1}')
echo "redis+redis-bench req/s $rps $lat server_cpu_us/req $(echo "($c1-$c0)*10000/$n" | bc -l | cut -c1-5) client_cpu_us/req $(echo "($b1-$b0)*10000/($rps*2)" | bc -l | cut -c1-5)"
grep -i "error" /tmp/rb.out | head -2
