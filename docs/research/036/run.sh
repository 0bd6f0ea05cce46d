#!/bin/sh
# Research note 036: the benchmarks of live queries and scheduled handlers.
# Usage: sh docs/research/036/run.sh [RUNS]   (from the repository's root; builds release first)
set -eu
runs=${1:-3}
cargo build --release -p pure-bench -p pure-serve
bin=${CARGO_TARGET_DIR:-target}/release/pure-bench
mkdir -p docs/research/036/raw
for interval in 25 0; do
  for run in $(seq "$runs"); do
    "$bin" live --data /work/tmp/livebench --interval-ms "$interval" 2>&1 | grep -v '^pure-runtime\|^pure-serve'
  done
done | tee docs/research/036/raw/live-1000-subscribers.txt
for run in $(seq "$runs"); do
  "$bin" schedules --data /work/tmp/schedbench 2>&1 | grep -v '^pure-runtime\|^pure-serve'
done | tee docs/research/036/raw/schedules-100000.txt
