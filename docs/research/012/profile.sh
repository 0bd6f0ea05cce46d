#!/usr/bin/env bash
# The owner's profile of note 012: pure-bench tpcc --engine pure, W=1, 64 terminals, in RAM;
# perf samples the pure-serve process (cpu-clock, DWARF call graphs) for 10 s of the window,
# then profile.py splits the samples into the owner's work (handler steps, map operations,
# copying nodes shared with the snapshot, allocation, encoding), the syncer, reads, HTTP.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bench="${BENCH:-target/release/pure-bench}"
dir=/dev/shm/tpcc-profile
rm -rf "$dir"
"$bench" tpcc --engine pure --warehouses 1 --terminals 64 --seconds 25 --warmup 5 --dir "$dir" \
  --json "$here/profile-run.json" > "$here/profile-run.txt" &
run=$!
until pid=$(pgrep -f "pure-serve .*--data $dir/pure --listen" | head -1) && [[ -n $pid ]]; do sleep 0.2; done
# The load is done when the server listens; then skip the warm-up.
sleep 10
perf record -e cpu-clock -F 997 --call-graph dwarf,32768 -p "$pid" -o /tmp/tpcc-profile.data -- sleep 10
wait "$run"
perf script -i /tmp/tpcc-profile.data --no-inline 2>/dev/null | python3 "$here/profile.py" > "$here/profile.md"
cat "$here/profile.md"
