#!/usr/bin/env bash
# Research note 013, third round: the tree and imbl on the product's row (triomphe's ThinArc).
# Runs the probe's checks and every variant once, then the decisive variants alone twice
# (0 floor; 12/13 imbl as Pure uses it; 14/15 the tree, rows counted once; 16/17 the same with
# append splits; the odd ones with a snapshot every 64 calls), then callgrind on 13, 15, 17.
# Usage: docs/research/013/round3/run.sh [OUT_DIR]   (from the repository's root; ~8 min)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/probe-013-round3}
mkdir -p "$out"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/../../../../target/probe}
(cd "$here/../probe" && cargo build --release -q)
bin=$CARGO_TARGET_DIR/release/probe-013
"$bin" 25 > "$out/all.txt" 2> "$out/all.err"
for run in 1 2; do "$bin" 25 0,12,13,14,15,16,17 > "$out/run-$run.txt" 2> /dev/null; done
for v in 13 15 17; do
  valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*Variant*batch*' \
    --callgrind-out-file="$out/v$v.out" "$bin" 4 "$v" > "$out/v$v.txt" 2> "$out/v$v.err" &
done
wait
python3 - "$out" <<'PY'
import sys
out = sys.argv[1]
calls = 5 * 500
print("| # | Ir/call | L1 misses/call | LL misses/call | model cycles/call |")
print("|---|---:|---:|---:|---:|")
for v in (13, 15, 17):
    for line in open(f"{out}/v{v}.out"):
        if line.startswith("summary:"):
            ir, dr, dw, i1, d1r, d1w, ilm, dlr, dlw = map(int, line.split()[1:])
            est = ir + 10 * (i1 + d1r + d1w) + 100 * (ilm + dlr + dlw)
            print(f"| {v} | {ir/calls:,.0f} | {(d1r+d1w)/calls:,.0f} | {(dlr+dlw)/calls:,.1f} | {est/calls:,.0f} |")
PY
