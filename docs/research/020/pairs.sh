#!/bin/sh
# Paired fillbatch runs over HTTP: base (bodies over 64 KiB parsed on the blocking pool) against
# b256 (parsed on the HTTP thread up to 256 KiB), order alternated, each after warm.py 1024.
#   sh pairs.sh PAIRS     (from the repository's root; binaries in /tmp/exp/{base,b256})
pairs=${1:-8}
for i in $(seq "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then order="base b256"; else order="b256 base"; fi
  for v in $order; do
    sync; sleep 1; python3 docs/research/016/warm.py 1024
    echo "[$v] $(/tmp/exp/$v/pure-bench kv --engine pure --dir /work/kvdisk/run --quiet --num 300000 --benchmarks fillbatch 2>/dev/null | grep ^fillbatch)"
  done
done
