#!/bin/sh
# In-process fillbatch then readrandom of 300,000 entries, THP on (mimalloc's default then) and
# off (MIMALLOC_ALLOW_THP=0), alternating, PAIRS times. Run on the build before `no_thp`: after
# it, both modes are off.
#   sh docs/research/019/thp-read.sh DISK_DIR PAIRS > OUT
set -u
disk=${1:-/work/kvdisk}
pairs=${2:-6}
for p in $(seq "$pairs"); do
  for m in on off; do
    envs="X=1"
    [ $m = off ] && envs="MIMALLOC_ALLOW_THP=0"
    env $envs target/release/pure-bench kv --engine pure --in-process --dir "$disk/run" --quiet \
      --num 300000 --reads 300000 --benchmarks fillbatch,readrandom 2>/dev/null \
      | grep -E "^(readrandom|fillbatch)" | sed "s/^/$m /"
  done
done
