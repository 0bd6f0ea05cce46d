#!/bin/sh
# Transparent huge pages on and off for Pure's allocator (mimalloc's allow_thp), A/B in rounds
# with the settings in turn and SQLite WAL FULL beside them, on disk:
#   fillbatch over HTTP, 300,000 entries (state growth: every row is new memory);
#   readrandom in-process on 2,000,000 entries (a large state read at random: TLB-bound).
#   docs/research/016/thp.sh DISK_DIR ROUNDS > docs/research/016/thp.txt   (after cargo build --release)
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-5}
bench=target/release/pure-bench
for round in $(seq "$rounds"); do
  for thp in 1 0; do
    sync; sleep 1
    echo "== round $round: MIMALLOC_ALLOW_THP=$thp"
    MIMALLOC_ALLOW_THP=$thp $bench kv --engine pure --dir "$disk/run" --quiet --num 300000 \
      --benchmarks fillbatch 2>/dev/null | grep -E "^fillbatch" | sed 's/^/http /'
    MIMALLOC_ALLOW_THP=$thp $bench kv --engine pure --in-process --dir "$disk/run" --quiet \
      --num 2000000 --reads 1000000 --benchmarks fillbatch,readrandom 2>/dev/null \
      | grep -E "^(fillbatch|readrandom)" | sed 's/^/in-process /'
  done
  sync; sleep 1
  echo "== round $round: sqlite wal full 16K"
  $bench kv --engine sqlite --journal-mode wal --synchronous full --page-size 16384 \
    --dir "$disk/run" --quiet --num 300000 --benchmarks fillbatch 2>/dev/null | grep -E "^fillbatch"
done
