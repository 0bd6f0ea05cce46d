#!/usr/bin/env bash
# Research note 013: times every variant of the probe (two runs), then counts each chosen
# variant's instructions and simulated cache misses with callgrind (collected inside the timed
# batches only), and prints the cost model Ir + 10 x L1 misses + 100 x LL misses per call.
# Usage: docs/research/013/probe.sh [OUT_DIR]   (from the repository's root; ~15 min on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/probe-013}
mkdir -p "$out"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/../../../target/probe}
(cd "$here/probe" && cargo build --release -q)
bin=$CARGO_TARGET_DIR/release/probe-013
for run in 1 2; do "$bin" 25 > "$out/timed-$run.txt"; done
# 0 floor, 1-2 imbl today's representation, 3-4 byte key, 5-6 packed rows, 7-8 raw rows,
# 10-11 the generational tree (the odd indices with a snapshot every 64 calls but 1 and 0).
for v in 0 1 2 3 4 5 6 7 8 10 11; do
  valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*Variant*batch*' \
    --callgrind-out-file="$out/v$v.out" "$bin" 4 "$v" > "$out/v$v.txt" 2> "$out/v$v.err" &
  if (( v % 2 == 1 )); then wait; fi
done
wait
python3 - "$out" <<'PY'
import sys, glob, os
out = sys.argv[1]
calls = 5 * 500  # 4 batches and the warm-up round, 500 calls each
rows = []
for path in sorted(glob.glob(f"{out}/v*.out"), key=lambda p: int(os.path.basename(p)[1:-4])):
    v = os.path.basename(path)[1:-4]
    name = open(f"{out}/v{v}.txt").read().strip().splitlines()[-1].split("|")[1].strip()
    for line in open(path):
        if line.startswith("summary:"):
            ir, dr, dw, i1, d1r, d1w, ilm, dlr, dlw = map(int, line.split()[1:])
            est = ir + 10 * (i1 + d1r + d1w) + 100 * (ilm + dlr + dlw)
            rows.append((v, name, ir / calls, (d1r + d1w) / calls, (dlr + dlw) / calls, est / calls))
print("| # | variant | Ir/call | L1 misses/call | LL misses/call | model cycles/call |")
print("|---|---|---:|---:|---:|---:|")
for v, name, ir, d1, ll, est in rows:
    print(f"| {v} | {name} | {ir:,.0f} | {d1:,.0f} | {ll:,.0f} | {est:,.0f} |")
PY
