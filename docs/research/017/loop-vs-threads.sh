#!/bin/sh
# alternate the client: 16 blocking threads, then one event loop; print µs/op, avg sync µs, writes/group
# Run from the repository root after building loopdrive (see nice.sh).
#   sh docs/research/017/loop-vs-threads.sh ROUNDS
rm -rf ${DISK:-/tmp/kv17}/lp; target/release/pure-serve apps/kv --data ${DISK:-/tmp/kv17}/lp --listen 127.0.0.1:8999 2>/dev/null & 
sleep 1; pid=$(pgrep -f "data ${DISK:-/tmp/kv17}/lp")
E=target/release/examples/loopdrive
$E 127.0.0.1:8999 16 100000 threads >/dev/null
syn=$(for t in $(ls /proc/$pid/task); do [ "$(cat /proc/$pid/task/$t/comm)" = pure-syncer ] && echo $t; done)
m() { curl -s 127.0.0.1:8999/_pure/metrics | awk '/^pure_groups_total/ {g=$2} /^pure_sync_seconds_sum/ {s=$2} /^pure_writes_total/ {w=$2} END {print g, s, w}'; }
for r in $(seq ${1:-4}); do for mode in threads loop; do
  
  a=$(m); out=$($E 127.0.0.1:8999 16 64000 $mode); b=$(m)
  echo "$a $b" | awk -v n=$mode -v o="$out" '{printf "%7s %s  sync %.0f us  group %.2f\n", n, o, ($5-$2)/($4-$1)*1e6, ($6-$3)/($4-$1)}'
done; done
kill $pid
