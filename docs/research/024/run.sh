#!/bin/bash
# Paired runs of the build before (BEFORE_TARGET/release) and after (this checkout's
# target/release), alternating which goes first: TPC-C in RAM at 1, 16 and 64 terminals, then the
# scoreboard on the disk through 008/ab.sh. Raw outputs in raw/.
#   bash docs/research/024/run.sh BEFORE_CHECKOUT BEFORE_TARGET [PAIRS] [SB_PAIRS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1; before_target=$2; pairs=${3:-3}; sb_pairs=${4:-6}
mkdir -p "$here/raw"
tpcc() { # side terminals pair
  local side=$1 t=$2 n=$3 bench app
  if [ "$side" = before ]; then bench=$before_target/release/pure-bench; app=$before/apps/tpcc
  else bench=$root/target/release/pure-bench; app=$root/apps/tpcc; fi
  rm -rf /dev/shm/pure-024
  "$bench" tpcc --engine pure --terminals "$t" --seconds 15 --warmup 5 --dir /dev/shm/pure-024 \
    --app "$app" --json "$here/raw/tpcc-$t-$side-$n.json" > "$here/raw/tpcc-$t-$side-$n.txt" 2>&1
  echo "$side t=$t pair $n: $(grep -E "transactions/s" "$here/raw/tpcc-$t-$side-$n.txt" | cut -d';' -f1);" \
    "$(grep -E "CPU per" "$here/raw/tpcc-$t-$side-$n.txt" | cut -d';' -f1);" \
    "$(grep -E "commits/s" "$here/raw/tpcc-$t-$side-$n.txt")"
}
for t in 1 16 64; do
  for n in $(seq "$pairs"); do
    if (( n % 2 )); then tpcc before "$t" "$n"; tpcc after "$t" "$n"
    else tpcc after "$t" "$n"; tpcc before "$t" "$n"; fi
  done
done | tee "$here/raw/tpcc-summary.txt"
rm -rf /dev/shm/pure-024
for c in 1 16 64; do
  echo "scoreboard on the disk, $c connections:"
  DATA=/work/benchdata-024 bash "$root/docs/research/008/ab.sh" "$sb_pairs" "$c" \
    "before:$before_target/release:" "after:$root/target/release:"
done | tee "$here/raw/scoreboard-ab.txt"
rm -rf /work/benchdata-024
