#!/bin/sh
# Target 1 again with longer runs (100,000 overwrites at 16 threads instead of 30,000), three
# rounds with the engines in turn, on disk (research 015): how much of the 30,000-write figure
# is the start and the tail, where fewer than 16 writers are left.
#   docs/research/015/long.sh DISK_DIR > docs/research/015/long.txt
set -u
disk=${1:-/work/kvdisk}
bench=target/release/pure-bench
for round in 1 2 3; do
  for engine in "--engine pure" "--engine pure --in-process" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 4096" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 16384"; do
    sync; sleep 1
    echo "== round $round: $engine"
    $bench kv $engine --dir "$disk/run" --quiet --num 100000 --writes 100000 --threads 16 \
      --benchmarks fillbatch,overwrite --histogram 2>/dev/null | grep -E "^(overwrite|Percentiles)" | tail -2
  done
done
