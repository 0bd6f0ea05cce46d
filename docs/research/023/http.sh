#!/bin/sh
# TPC-C over HTTP in RAM (W=1, 64 terminals, 20 s after 5 s of warm-up, /dev/shm), the build
# before issue 38's change and the build after it alternating, three runs each; raw outputs in
# raw/http-{before,after}-N.{txt,json}.
#   sh docs/research/023/http.sh BEFORE_CHECKOUT BEFORE_TARGET_DIR
# BEFORE_CHECKOUT is a worktree of the commit before (its apps/tpcc is used with its binary);
# BEFORE_TARGET_DIR holds its release build of pure-bench and pure-serve.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1
before_target=$2
for n in 1 2 3; do
  for side in before after; do
    if [ "$side" = before ]; then bench=$before_target/release/pure-bench; app=$before/apps/tpcc
    else bench=$root/target/release/pure-bench; app=$root/apps/tpcc; fi
    rm -rf /dev/shm/pure-023
    "$bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 --dir /dev/shm/pure-023 \
      --app "$app" --json "$here/raw/http-$side-$n.json" > "$here/raw/http-$side-$n.txt" 2>&1
    grep -E "transactions/s|CPU per|resident" "$here/raw/http-$side-$n.txt" | sed "s/^/$side $n: /"
  done
done
rm -rf /dev/shm/pure-023
