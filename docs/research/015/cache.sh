#!/bin/sh
# readrandom in-process with SQLite's page cache large enough for the whole database (research
# 015): the default 2,000 KiB reads most pages through the OS page cache.
#   docs/research/015/cache.sh DISK_DIR > docs/research/015/cache.txt
set -u
disk=${1:-/work/kvdisk}
bench=target/release/pure-bench
for round in 1 2 3; do
  for engine in "--engine pure --in-process" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 4096 --cache-size 2000" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 4096 --cache-size 262144" \
                "--engine sqlite --journal-mode wal --synchronous full --page-size 16384 --cache-size 262144"; do
    echo "== round $round: $engine"
    $bench kv $engine --dir "$disk/run" --quiet --num 300000 --reads 300000 \
      --benchmarks fillbatch,readrandom,readrandom --histogram 2>/dev/null | grep -E "^(readrandom|Percentiles)" | tail -2
  done
done
