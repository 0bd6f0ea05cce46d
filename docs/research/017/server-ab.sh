#!/bin/sh
# alternate two pure-serve binaries under 16 writers (loopdrive threads); µs/op, sync, group
# Run from the repository root after building loopdrive (see nice.sh).
#   sh docs/research/017/server-ab.sh ROUNDS OLD_PURE_SERVE NEW_PURE_SERVE [threads|loop]
E=target/release/examples/loopdrive
m() { curl -s 127.0.0.1:8999/_pure/metrics | awk '/^pure_groups_total/ {g=$2} /^pure_sync_seconds_sum/ {s=$2} /^pure_writes_total/ {w=$2} END {print g, s, w}'; }
for r in $(seq ${1:-4}); do for bin in $2 $3; do
  rm -rf ${DISK:-/tmp/kv17}/lp; $bin apps/kv --data ${DISK:-/tmp/kv17}/lp --listen 127.0.0.1:8999 2>/dev/null &
  sleep 1; pid=$!
  $E 127.0.0.1:8999 16 50000 ${4:-threads} >/dev/null
  a=$(m); out=$($E 127.0.0.1:8999 16 64000 ${4:-threads}); b=$(m)
  echo "$a $b" | awk -v n=$(basename $bin) -v o="$out" '{printf "%s %s  sync %.0f us  group %.2f\n", n, o, ($5-$2)/($4-$1)*1e6, ($6-$3)/($4-$1)}'
  kill $pid; wait $pid 2>/dev/null
done; done
