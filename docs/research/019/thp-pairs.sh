#!/bin/sh
# THP on (mimalloc's default then: it asks for huge pages on its arenas) against off
# (MIMALLOC_ALLOW_THP=0), in ABBA pairs: fillbatch of 300,000 entries, then 16 threads
# overwriting, over HTTP and in-process. Raw lines to stdout. Run on the build before `no_thp`
# (commit 38d72a8); after it, both modes are off.
#   sh docs/research/019/thp-pairs.sh DISK_DIR PAIRS > OUT     (after cargo build --release)
set -u
disk=${1:-/work/kvdisk}
pairs=${2:-4}
bench=target/release/pure-bench
run() {  # $1: on|off, $2: http|in-process
  mode=""
  [ "$2" = in-process ] && mode="--in-process"
  envs="X=1"
  [ "$1" = off ] && envs="MIMALLOC_ALLOW_THP=0"
  sync; sleep 1
  env $envs $bench kv --engine pure $mode --dir "$disk/run" --quiet --num 300000 \
    --benchmarks fillbatch 2>/dev/null | grep -E "^fillbatch" | sed "s/^/thp $1 $2 1 /"
  sync; sleep 1
  env $envs $bench kv --engine pure $mode --dir "$disk/run" --quiet --num 100000 --writes 30000 \
    --threads 16 --benchmarks fillbatch,overwrite 2>/dev/null | grep -E "^overwrite" \
    | sed "s/^/thp $1 $2 16 /"
}
for pair in $(seq "$pairs"); do
  for transport in http in-process; do
    if [ $((pair % 2)) = 1 ]; then run on $transport; run off $transport
    else run off $transport; run on $transport; fi
  done
done
