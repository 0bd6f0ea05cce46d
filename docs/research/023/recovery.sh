#!/bin/sh
# Recovery of the TPC-C W=4 image: makes a W=4 data directory once (a second of transactions on
# the imported population), then starts each pure-serve on it five times and keeps the line
# that reports the image's decoding rate; raw output in raw/recovery-{before,after}.txt.
#   sh docs/research/023/recovery.sh BEFORE_CHECKOUT BEFORE_TARGET_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1
before_target=$2
data=/dev/shm/pure-023-w4
if [ ! -d "$data/pure" ]; then
  "$root/target/release/pure-bench" tpcc --warehouses 4 --terminals 4 --seconds 1 --warmup 0 \
    --dir "$data" --keep > /dev/null 2>&1
fi
recover() {
  "$1" "$2" --data "$data/pure" --listen 127.0.0.1:0 > /dev/null 2> "$here/raw/recovery.err" &
  pid=$!
  for _ in $(seq 1 300); do grep -q recovered "$here/raw/recovery.err" && break; sleep 0.1; done
  grep decoded "$here/raw/recovery.err"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
: > "$here/raw/recovery-before.txt"; : > "$here/raw/recovery-after.txt"
for _ in 1 2 3 4 5; do
  recover "$before_target/release/pure-serve" "$before/apps/tpcc" >> "$here/raw/recovery-before.txt"
  recover "$root/target/release/pure-serve" "$root/apps/tpcc" >> "$here/raw/recovery-after.txt"
done
rm -f "$here/raw/recovery.err"
cat "$here/raw/recovery-before.txt" "$here/raw/recovery-after.txt"
