#!/usr/bin/env bash
# Per-thread CPU split (user/sys µs and context switches per request) of pure-serve and of
# redis-server under the same pure-bench scoreboard load, plus the load generator's own CPU per
# request against each. Usage: split.sh CONNS. Samples a 4 s window inside each 6 s measured run.
set -u
C=${1:-64}
BIN=${BIN:-target/release/pure-serve}
BENCH=${BENCH:-target/release/pure-bench}
DATA=${DATA:-/work/benchdata-sb/split}
PORT=${PORT:-18095}
rm -rf "$DATA"; mkdir -p "$DATA"
$BIN apps/scoreboard ${SERVE_ARGS:-} --data "$DATA/pure" --listen "127.0.0.1:$PORT" > "$DATA.out" 2>/dev/null &
SP=$!
for _ in $(seq 200); do grep -q listening "$DATA.out" 2>/dev/null && break; sleep 0.05; done
snap() { for t in /proc/$1/task/*; do echo "$(basename $t) $(cat $t/comm) $(awk '{print $14, $15}' $t/stat) $(grep -E '^(non)?voluntary' $t/status | awk '{print $2}' | tr '\n' ' ')"; done; }
proc_ticks() { awk '{print $14+$15}' /proc/$1/stat; }
report() { # before after requests
  paste "$1" "$2" | awk -v n="$3" '{printf "  %-7s %-12s user_us/req=%5.1f sys_us/req=%5.1f vol_cs/req=%.3f invol_cs/req=%.3f\n",$1,$2,($9-$3)*1e4/n,($10-$4)*1e4/n,($11-$5)/n,($12-$6)/n}'
}
$BENCH scoreboard --url "http://127.0.0.1:$PORT" --data "$DATA" --seconds 6 --warmup 1 --connections "$C" --vs-redis > "$DATA.bench" 2>&1 &
BP=$!
sleep 2.5
reqs() { curl -s "http://127.0.0.1:$PORT/_pure/metrics" | awk '/^pure_http_requests_total/ {s+=$2} END {print s+0}'; }
r0=$(reqs); snap $SP > "$DATA.p0"; b0=$(proc_ticks $BP); sleep 4; snap $SP > "$DATA.p1"; b1=$(proc_ticks $BP); r1=$(reqs)
RP=$(pgrep -P $BP redis-server || pgrep -x redis-server | head -1)
sleep 3.5
q0=$(redis-cli -p "$(awk '/^port/ {print $2}' $DATA/redis/redis.conf 2>/dev/null || echo 0)" info stats 2>/dev/null | awk -F: '/total_commands_processed/ {print $2+0}')
snap $RP > "$DATA.r0"; c0=$(proc_ticks $BP); t0=$(date +%s.%N); sleep 4; snap $RP > "$DATA.r1"; c1=$(proc_ticks $BP); t1=$(date +%s.%N)
wait $BP; kill -TERM $SP; wait $SP 2>/dev/null
cat "$DATA.bench"
n=$((r1-r0)); echo "pure-serve at $C connections: $n requests in the 4 s window"
report "$DATA.p0" "$DATA.p1" $n
awk -v a=$b0 -v b=$b1 -v n=$n 'BEGIN {printf "  load generator: %.1f µs CPU per request\n", (b-a)*1e4/n}'
rate=$(awk '/^redis +[0-9]/ {print $3}' "$DATA.bench")
m=$(awk -v r="$rate" -v a="$t0" -v b="$t1" 'BEGIN {printf "%d", r*(b-a)}')
echo "redis-server at $C connections: ~$m requests in the 4 s window (its posts/s x window)"
report "$DATA.r0" "$DATA.r1" $m
awk -v a=$c0 -v b=$c1 -v n=$m 'BEGIN {printf "  load generator: %.1f µs CPU per request\n", (b-a)*1e4/n}'
