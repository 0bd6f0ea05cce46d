#!/bin/sh
# ABBA pairs: baseline against gather NUM US; overwrite at 16 writers over HTTP
cfg="$1 $2"; rounds=${3:-8}
for r in $(seq $rounds); do
  if [ $((r % 2)) = 1 ]; then order="0_0 ${1}_${2}"; else order="${1}_${2} 0_0"; fi
  for g in $order; do
    n=${g%_*}; u=${g#*_}
    rm -rf /work/kvdisk/run; sync; sleep 1; python3 docs/research/016/warm.py 1024
    PURE_GATHER_NUM=$n PURE_GATHER_US=$u target/release/pure-bench kv --engine pure ${INPROC:+--in-process} --dir /work/kvdisk/run --quiet --num 100000 --writes 30000 --threads 16 --benchmarks fillbatch,overwrite 2>/dev/null | grep -E "^overwrite" | sed "s/^/round $r gather $n $u /"
  done
done
