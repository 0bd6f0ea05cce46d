#!/bin/sh
# fill100K (64 KiB values, one durable write each) side by side on disk, three rounds (research 015).
#   docs/research/015/large.sh DISK_DIR > docs/research/015/large.txt
set -u
disk=${1:-/work/kvdisk}
bench=target/release/pure-bench
for round in 1 2 3; do
  for engine in "--engine pure" "--engine pure --in-process" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 4096" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 16384"; do
    sync; sleep 1
    echo "== round $round: $engine"
    $bench kv $engine --dir "$disk/run" --quiet --num 3000000 --benchmarks fill100K --histogram 2>/dev/null \
      | grep -E "^(fill100K|Percentiles)"
  done
done
