#!/bin/sh
# The targets of issue 17, side by side on disk, three rounds with the engines in turn:
# 16 threads of durable overwrite (Pure over HTTP against the best durable SQLite of the sweep:
# WAL FULL, at 4 and 16 KiB pages), fillbatch at 1 thread, and readrandom in-process.
#   docs/research/015/targets.sh DISK_DIR OUT      (after cargo build --release)
set -eu
disk=${1:-/work/kvdisk}
out=${2:-docs/research/015}
bench=target/release/pure-bench
targets="$out/targets.txt"
: > "$targets"
for round in 1 2 3; do
  for engine in "--engine pure" "--engine pure --in-process" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 4096" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 16384"; do
    echo "== round $round: $engine" >> "$targets"
    $bench kv $engine --dir "$disk/run" --quiet --num 300000 --reads 300000 \
      --benchmarks fillbatch,readrandom >> "$targets" 2>/dev/null
    $bench kv $engine --dir "$disk/run" --quiet --num 100000 --writes 30000 --threads 16 \
      --benchmarks fillbatch,overwrite >> "$targets" 2>/dev/null
  done
done
