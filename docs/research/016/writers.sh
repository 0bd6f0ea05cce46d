#!/bin/sh
# Target 1 of issue 17 alone: 16 threads of durable single-key overwrites on 100,000 entries,
# Pure over HTTP against SQLite WAL FULL at 4 and 16 KiB pages (the best durable SQLite settings
# of the sweep, research 015), engines in turn in each round, on disk.
#   docs/research/016/writers.sh DISK_DIR ROUNDS WRITES > OUT   (after cargo build --release)
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-5}
writes=${3:-30000}
bench=target/release/pure-bench
for round in $(seq "$rounds"); do
  for engine in "--engine pure" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 4096" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 16384"; do
    sync; sleep 1
    echo "== round $round: $engine"
    $bench kv $engine --dir "$disk/run" --quiet --num 100000 --writes "$writes" --threads 16 \
      --histogram --benchmarks fillbatch,overwrite 2>/dev/null | grep -E "^overwrite|^Percentiles|^Count"
  done
done
