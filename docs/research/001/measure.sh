#!/bin/sh
# Measures the New-Order-like handler: instructions per call (callgrind, script minus load-only,
# over 1000 calls) and wall-clock medians (interleaved batches, the bench's own table).
# Usage: docs/research/001/measure.sh <label>   (from the repository root, after
#        cargo build -p pure-bench --release)
set -eu
label=$1
out=docs/research/001/raw/$label
mkdir -p "$out"
bin=target/release/pure-bench
for v in load script; do
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$v.out" \
    "$bin" owner --only neworder --variant $v --batch 500 --batches 2 \
    >"$out/callgrind.$v.log" 2>&1
done
total() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
l=$(total "$out/callgrind.load.out"); s=$(total "$out/callgrind.script.out")
echo "instructions per script call: $(( (s - l) / 1000 ))" | tee "$out/instructions.txt"
for i in 1 2 3; do
  "$bin" owner --only neworder --batch 500 --batches 15 2>/dev/null | tee "$out/wall.$i.txt"
done
