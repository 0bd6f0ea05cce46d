#!/bin/sh
# The figures after issue 38's change (the tree in place): three runs of each part, as JSON and text in raw/.
#   sh docs/research/023/before.sh [PURE_BENCH (default target/release/pure-bench)]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bench=${1:-$root/target/release/pure-bench}
cd "$root"
for n in 1 2 3; do
  "$bench" owner --only tpcc --json "$here/raw/after-tpcc-$n.json" > "$here/raw/after-tpcc-$n.txt" 2>&1
  "$bench" owner --only neworder --json "$here/raw/after-neworder-$n.json" > "$here/raw/after-neworder-$n.txt" 2>&1
done
