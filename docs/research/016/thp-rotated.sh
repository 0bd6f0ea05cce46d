#!/bin/sh
# thp.sh again, with the order of the two settings alternating from round to round and every
# run warm (docs/research/016/warm.py just before it), so that neither setting always follows
# the other (see 016's "Run order decides fillbatch").
#   docs/research/016/thp-rotated.sh DISK_DIR ROUNDS > docs/research/016/thp-rotated.txt
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-4}
bench=target/release/pure-bench
here=$(dirname "$0")
for round in $(seq "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then order="1 0"; else order="0 1"; fi
  for thp in $order; do
    sync; sleep 1; python3 "$here/warm.py" 1024
    echo "== round $round: MIMALLOC_ALLOW_THP=$thp"
    MIMALLOC_ALLOW_THP=$thp $bench kv --engine pure --dir "$disk/run" --quiet --num 300000 \
      --benchmarks fillbatch 2>/dev/null | grep -E "^fillbatch" | sed 's/^/http /'
    sync; sleep 1; python3 "$here/warm.py" 1024
    MIMALLOC_ALLOW_THP=$thp $bench kv --engine pure --in-process --dir "$disk/run" --quiet \
      --num 2000000 --reads 1000000 --benchmarks fillbatch,readrandom 2>/dev/null \
      | grep -E "^(fillbatch|readrandom)" | sed 's/^/in-process /'
  done
done
