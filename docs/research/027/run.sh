#!/bin/sh
# Research 027: the TPC-C driver before (a thread per terminal) and after (one event loop),
# alternating, the same server.
#   sh docs/research/027/run.sh BEFORE_BIN_DIR [TERMINALS...]
# BEFORE_BIN_DIR holds the before's pure-bench, and beside it the after's pure-serve (the same server).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1; shift
raw=$here/raw
mkdir -p "$raw"
for t in "${@:-64}"; do
  for n in 1 2 3; do for s in before after; do
    if [ $s = before ]; then bench=$before/pure-bench; else bench=$root/target/release/pure-bench; fi
    rm -rf /dev/shm/pure-027
    "$bench" tpcc --engine pure --terminals "$t" --seconds 20 --warmup 5 --dir /dev/shm/pure-027 \
      --app "$root/apps/tpcc" --json "$raw/$s-$t-$n.json" > "$raw/$s-$t-$n.txt" 2>&1
    echo "$s $t terminals, run $n: $(grep -E 'transactions/s' "$raw/$s-$t-$n.txt" | cut -d';' -f1);" \
      "$(grep -E 'CPU per' "$raw/$s-$t-$n.txt")"
  done; done
done
rm -rf /dev/shm/pure-027
