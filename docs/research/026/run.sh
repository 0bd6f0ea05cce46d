#!/bin/sh
# Research 026: the decisive figures, the build before (05b17e1) and the build after (this
# change) alternating, on this machine; raw outputs in raw/.
#   sh docs/research/026/run.sh BEFORE_CHECKOUT BEFORE_TARGET_DIR [PARTS]
# BEFORE_CHECKOUT is a worktree of the commit before (its apps are used with its binaries);
# BEFORE_TARGET_DIR holds its release build of pure-bench and pure-serve. PARTS (default all):
# any of owner http memory recovery.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1
before_target=$2
parts=${3:-"owner http memory recovery"}
raw=$here/raw
mkdir -p "$raw"
side() { # side NAME -> sets bench, serve, apps
  if [ "$1" = before ]; then bench=$before_target/release/pure-bench; serve=$before_target/release/pure-serve; apps=$before/apps
  else bench=$root/target/release/pure-bench; serve=$root/target/release/pure-serve; apps=$root/apps; fi
}
for part in $parts; do
case $part in
owner)
  for n in 1 2 3; do for s in before after; do side $s
    "$bench" owner --only neworder --json "$raw/$s-neworder-$n.json" > "$raw/$s-neworder-$n.txt" 2>&1
    "$bench" owner --only tpcc --tpcc-app "$apps/tpcc" --json "$raw/$s-tpcc-$n.json" > "$raw/$s-tpcc-$n.txt" 2>&1
    echo "$s $n: $(grep 'against the floor' "$raw/$s-neworder-$n.txt")"
    echo "$s $n: $(grep -i 'weighted' "$raw/$s-tpcc-$n.txt" | head -2 | tr '\n' ' ')"
  done; done ;;
http)
  for n in 1 2 3; do for s in before after; do side $s
    rm -rf /dev/shm/pure-026
    "$bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 --dir /dev/shm/pure-026 \
      --app "$apps/tpcc" --json "$raw/http-$s-$n.json" > "$raw/http-$s-$n.txt" 2>&1
    grep -E "transactions/s|CPU per|resident" "$raw/http-$s-$n.txt" | sed "s/^/$s $n: /"
  done; done
  rm -rf /dev/shm/pure-026 ;;
memory)
  for n in 1 2; do for s in before after; do side $s
    "$bench" scoreboard-memory --players 500000 --data /dev/shm/pure-026-mem --sync none \
      --app "$apps/scoreboard" > "$raw/memory-$s-$n.txt" 2>&1
    grep -E "resident set" "$raw/memory-$s-$n.txt" | sed "s/^/$s $n: /"
  done; done
  rm -rf /dev/shm/pure-026-mem ;;
recovery)
  data=/dev/shm/pure-026-w4
  if [ ! -d "$data/pure" ]; then
    "$before_target/release/pure-bench" tpcc --warehouses 4 --terminals 4 --seconds 1 --warmup 0 \
      --dir "$data" --app "$before/apps/tpcc" --keep > /dev/null 2>&1
  fi
  for s in before after; do : > "$raw/recovery-$s.txt"; done
  for _ in 1 2 3 4 5; do for s in before after; do side $s
    "$serve" "$apps/tpcc" --data "$data/pure" --listen 127.0.0.1:0 > /dev/null 2> "$raw/recovery.err" &
    pid=$!
    for _ in $(seq 1 300); do grep -q recovered "$raw/recovery.err" && break; sleep 0.1; done
    grep decoded "$raw/recovery.err" >> "$raw/recovery-$s.txt"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done; done
  rm -f "$raw/recovery.err"
  cat "$raw/recovery-before.txt" "$raw/recovery-after.txt" ;;
esac
done
