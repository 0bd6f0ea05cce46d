#!/bin/sh
# alternate syncer nice 0 / -10 under 16 writers; print µs/op, avg sync µs, writes/group
# Run from the repository root after building loopdrive (loopdrive.rs: copy it to
# benchmarks/examples/ and `cargo build --release --example loopdrive -p pure-bench`), as root
# (a negative nice value). DISK: a directory on the disk under test.
#   sh docs/research/017/nice.sh ROUNDS
rm -rf ${DISK:-/tmp/kv17}/lp; target/release/pure-serve apps/kv --data ${DISK:-/tmp/kv17}/lp --listen 127.0.0.1:8999 2>/dev/null & 
sleep 1; pid=$(pgrep -f "data ${DISK:-/tmp/kv17}/lp")
E=target/release/examples/loopdrive
$E 127.0.0.1:8999 16 100000 threads >/dev/null
syn=$(for t in $(ls /proc/$pid/task); do [ "$(cat /proc/$pid/task/$t/comm)" = pure-syncer ] && echo $t; done)
m() { curl -s 127.0.0.1:8999/_pure/metrics | awk '/^pure_groups_total/ {g=$2} /^pure_sync_seconds_sum/ {s=$2} /^pure_writes_total/ {w=$2} END {print g, s, w}'; }
for r in $(seq ${1:-4}); do for n in 0 -10; do
  renice -n $n -p $syn >/dev/null
  a=$(m); out=$($E 127.0.0.1:8999 16 64000 threads); b=$(m)
  echo "$a $b" | awk -v n=$n -v o="$out" '{printf "nice %3s %s  sync %.0f us  group %.2f\n", n, o, ($5-$2)/($4-$1)*1e6, ($6-$3)/($4-$1)}'
done; done
kill $pid
