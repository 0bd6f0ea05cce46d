#!/bin/bash
# usage: tpcc-ab.sh OUT ROUNDS : interleaved TPC-C runs of ed3482c and the current build, W=1, 16 terminals.
# Needs ed3482c built beside: git worktree add /tmp/wt-ed34 ed3482c; cd /tmp/wt-ed34;
# CARGO_TARGET_DIR=/work/wt-target cargo build --release -p pure-bench -p pure-serve --bins
out=$1; rounds=$2; mkdir -p $out
for r in $(seq 1 $rounds); do
  for engine in pure-inprocess pure; do
    for b in ed3482c now; do
      if [ $b = now ]; then bin=/work/main/target/release/pure-bench; app=/work/main/apps/tpcc; else bin=/work/wt-target/release/pure-bench; app=/tmp/wt-ed34/apps/tpcc; fi
      rm -rf /dev/shm/ab
      $bin tpcc --engine $engine --warehouses 1 --terminals 16 --seconds 15 --warmup 5 --dir /dev/shm/ab --app $app --json $out/$b-$engine-$r.json > $out/$b-$engine-$r.txt 2>&1
      echo "$b $engine $r: $(grep -E 'transactions/s' $out/$b-$engine-$r.txt | cut -c1-40) | $(grep -E 'CPU per transaction' $out/$b-$engine-$r.txt)"
    done
  done
done
