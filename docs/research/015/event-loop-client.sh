#!/bin/sh
# Needs docs/research/015/event-loop-client.diff applied (the --http-client flag was not kept).
# Run from the repository root after cargo build --release, with a kv database in /work/kvdisk/ow.
B=target/release/pure-bench
for r in 1 2 3 4 5; do
  for hc in event-loop threads; do
    printf "%s %s " $r $hc
    $B kv --engine pure --http-client $hc --dir /work/kvdisk/ow --quiet --num 100000 --writes 30000 --threads 16 --use-existing-db --benchmarks overwrite 2>&1 | grep -E "^overwrite"
  done
  printf "%s sqlite " $r
  $B kv --engine sqlite --journal-mode wal --synchronous full --dir /work/kvdisk/sq --quiet --num 100000 --writes 30000 --threads 16 --use-existing-db --benchmarks overwrite 2>&1 | grep -E "^overwrite"
done
