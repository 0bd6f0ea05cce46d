#!/bin/sh
# THP on against off (MIMALLOC_ALLOW_THP=0) for fillbatch over HTTP alone, in ABBA pairs.
# Run on the build before `no_thp` (commit 38d72a8); after it, both modes are off.
#   sh docs/research/019/thp-http.sh DISK_DIR PAIRS > OUT     (after cargo build --release)
set -u
disk=${1:-/work/kvdisk}
pairs=${2:-10}
bench=target/release/pure-bench
run() {
  envs="X=1"
  [ "$1" = off ] && envs="MIMALLOC_ALLOW_THP=0"
  sync; sleep 1
  env $envs $bench kv --engine pure --dir "$disk/run" --quiet --num 300000 \
    --benchmarks fillbatch 2>/dev/null | grep -E "^fillbatch" | sed "s/^/thp $1 http 1 /"
}
for pair in $(seq "$pairs"); do
  if [ $((pair % 2)) = 1 ]; then run on; run off; else run off; run on; fi
done
