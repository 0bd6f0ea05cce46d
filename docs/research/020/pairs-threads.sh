#!/bin/sh
# Paired fillbatch runs over HTTP: the server's default HTTP threads (2 here) against
# --server-threads 1, order alternated, each after warm.py 1024.
#   sh pairs-threads.sh PAIRS     (from the repository's root, after cargo build --release)
pairs=${1:-8}
for i in $(seq "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then order="2 1"; else order="1 2"; fi
  for t in $order; do
    sync; sleep 1; python3 docs/research/016/warm.py 1024
    echo "[threads $t] $(target/release/pure-bench kv --engine pure --server-threads $t --dir /work/kvdisk/run --quiet --num 300000 --benchmarks fillbatch 2>/dev/null | grep ^fillbatch)"
  done
done
