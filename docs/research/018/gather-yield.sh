#!/bin/sh
# alternate PURE_GATHER 0/1 under 16 writers over HTTP; overwrite micros/op
for r in $(seq ${1:-6}); do for g in 0 1; do
  rm -rf /work/kvdisk/run; sync; sleep 1; python3 docs/research/016/warm.py 1024
  PURE_GATHER=$g target/release/pure-bench kv --engine pure --dir /work/kvdisk/run --quiet --num 100000 --writes 30000 --threads 16 --benchmarks fillbatch,overwrite 2>/dev/null | grep -E "^overwrite" | sed "s/^/gather $g /"
done; done
