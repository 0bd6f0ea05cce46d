#!/usr/bin/env bash
# Research note 022: concread's BptreeMap beside the hand-written generational tree and imbl, in
# research 013's round-3 harness (copied to 022/probe; 013's copy untouched).
# 1. every variant once (the probe's checks, the memory figures, all 20 variants, 25 batches);
# 2. the decisive variants alone, twice, alternating 500-call batches in one process:
#    0 floor; 12/13 imbl as Pure uses it; 16/17 the tree, rows counted once, append splits;
#    18/19 concread's BptreeMap (the odd ones with a snapshot every 64 calls);
# 3. callgrind on 13, 17, 19 (snapshots) and 12, 16, 18 (none), collected in the batches, and
#    the model instructions + 10 x L1 misses + 100 x LL misses per call (2,500 calls).
# Usage: docs/research/022/run.sh [OUT_DIR]   (from anywhere; ~5 min on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/raw}
mkdir -p "$out"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/probe-022-target}
(cd "$here/probe" && cargo build --release -q)
bin=$CARGO_TARGET_DIR/release/probe-022
"$bin" 25 > "$out/all.txt" 2> "$out/all.err"
for run in 1 2; do "$bin" 25 0,12,13,16,17,18,19 > "$out/run-$run.txt" 2> "$out/run-$run.err"; done
# Two at a time: the machine has two cores (callgrind's counts do not depend on the timing).
for pair in "13 17" "19 12" "16 18"; do
  for v in $pair; do
    valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*Variant*batch*' \
      --callgrind-out-file="$out/v$v.out" "$bin" 4 "$v" > "$out/v$v.txt" 2> "$out/v$v.err" &
  done
  wait
done
python3 - "$out" > "$out/callgrind.md" <<'PY'
import sys
out = sys.argv[1]
calls = 5 * 500
print("| # | Ir/call | L1 misses/call | LL misses/call | model cycles/call |")
print("|---|---:|---:|---:|---:|")
for v in (12, 13, 16, 17, 18, 19):
    for line in open(f"{out}/v{v}.out"):
        if line.startswith("summary:"):
            ir, dr, dw, i1, d1r, d1w, ilm, dlr, dlw = map(int, line.split()[1:])
            est = ir + 10 * (i1 + d1r + d1w) + 100 * (ilm + dlr + dlw)
            print(f"| {v} | {ir/calls:,.0f} | {(d1r+d1w)/calls:,.0f} | {(dlr+dlw)/calls:,.1f} | {est/calls:,.0f} |")
PY
cat "$out/callgrind.md"
gzip -f "$out"/v*.out   # to annotate one: zcat v19.out.gz > /tmp/v19.out
