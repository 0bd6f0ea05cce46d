#!/bin/sh
# mimalloc's page purging and transparent huge pages, A/B on the kv benchmarks (research 015):
# rounds with the settings in turn, on disk.
#   docs/research/015/allocator.sh DISK_DIR ROUNDS > docs/research/015/allocator.txt
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-3}
bench=target/release/pure-bench
for round in $(seq "$rounds"); do
  for setting in "DEFAULT=1" "MIMALLOC_PURGE_DELAY=1000" "MIMALLOC_ALLOW_THP=0" \
                 "MIMALLOC_PURGE_DELAY=1000 MIMALLOC_ALLOW_THP=0"; do
    echo "== round $round: $setting"
    env $setting $bench kv --engine pure --dir "$disk/run" --quiet --num 600000 \
      --benchmarks fillbatch 2>/dev/null | grep -E "^fillbatch"
    env $setting $bench kv --engine pure --dir "$disk/run" --quiet --num 100000 --writes 30000 \
      --threads 16 --benchmarks fillbatch,overwrite 2>/dev/null | grep -E "^overwrite"
    env $setting $bench kv --engine pure --in-process --dir "$disk/run" --quiet --num 2000000 \
      --reads 1000000 --benchmarks fillbatch,readrandom 2>/dev/null | grep -E "^(fillbatch|readrandom)" | sed 's/^/in-process /'
  done
done
