#!/bin/sh
# The figures after issue 38's change: three runs of each part, as JSON and text in raw/.
#   sh docs/research/023/after.sh [NAME (default after)] [PURE_BENCH (default target/release/pure-bench)]
# raw/after-*: the tree in place, the bench dropping each replaced snapshot on its own thread
# (as before the change); raw/after2-*: the bench dropping it on a thread of its own, as the
# syncer does in the server.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
name=${1:-after}
bench=${2:-$root/target/release/pure-bench}
cd "$root"
for n in 1 2 3; do
  "$bench" owner --only tpcc --json "$here/raw/$name-tpcc-$n.json" > "$here/raw/$name-tpcc-$n.txt" 2>&1
  "$bench" owner --only neworder --json "$here/raw/$name-neworder-$n.json" > "$here/raw/$name-neworder-$n.txt" 2>&1
done
