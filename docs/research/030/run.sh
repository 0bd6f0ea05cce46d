#!/bin/sh
# Research 030: the owner's calls before (BEFORE: a checkout of bc91f35 built into BEFORE_BIN)
# and after (this tree's target/release): callgrind's instructions per call of each kind, the
# timed owner benchmark and TPC-C over HTTP alternating, then the ratios to SQLite in RAM and
# on disk (DISK: a directory on a block device; /work here, the virtio disk vda).
#   sh docs/research/030/run.sh BEFORE BEFORE_BIN [PARTS] [DISK]   (PARTS: "1 2 3 4 5"; 6, the
#   tail at equal load, reads part 4's SQLite rate)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1; before_bin=$2; parts=${3:-1 2 3 4 5}; disk=${4:-/work/tmp/pure-030}
part() { case " $parts " in *" $1 "*) return 0;; *) return 1;; esac; }
after_bin=$root/target/release
raw=$here/raw
mkdir -p "$raw"
bin() { if [ "$1" = before ]; then echo "$before_bin"; else echo "$after_bin"; fi; }
app() { if [ "$1" = before ]; then echo "$before/apps/tpcc"; else echo "$root/apps/tpcc"; fi; }

# 1. Instructions inside the owner's calls (the population's load is not collected), per call
#    of each kind; the writes weighted by the mix (45 New-Order, 43 Payment, 4 Delivery).
part 1 && for s in before after; do
  valgrind --tool=callgrind --callgrind-out-file="$raw/callgrind-$s" \
    --toggle-collect='*owner_turn_*' "$(bin $s)/pure-bench" owner --only tpcc \
    --transactions 5000 --tpcc-app "$(app $s)" > "$raw/callgrind-$s.txt" 2>&1
  callgrind_annotate --inclusive=yes "$raw/callgrind-$s" 2>/dev/null \
    | python3 "$here/per_call.py" "$raw/callgrind-$s.txt" | tee "$raw/per-call-$s.txt"
done

# 2. The owner's calls in-process, timed (3 pairs).
part 2 && for n in 1 2 3; do for s in before after; do
  "$(bin $s)/pure-bench" owner --only tpcc --tpcc-app "$(app $s)" --json "$raw/owner-$s-$n.json" \
    > "$raw/owner-$s-$n.txt" 2>&1
  echo "owner $s $n: $(grep weighted "$raw/owner-$s-$n.txt")"
done; done

# 3. TPC-C over HTTP in RAM, W=1, 64 terminals (3 pairs): tx/s and the server's CPU.
part 3 && for n in 1 2 3; do for s in before after; do
  rm -rf /dev/shm/pure-030
  "$(bin $s)/pure-bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-030 --app "$(app $s)" --json "$raw/http-$s-$n.json" > "$raw/http-$s-$n.txt" 2>&1
  echo "http $s $n: $(grep -E 'transactions/s' "$raw/http-$s-$n.txt" | cut -d';' -f1);" \
    "$(grep -E 'CPU per' "$raw/http-$s-$n.txt")"
done; done

# 4. The ratios in RAM in the same session: SQLite's best closed-loop configuration of note 028
#    (one connection, one terminal) and Pure in-process, 64 terminals, once each.
part 4 && {
  rm -rf /dev/shm/pure-030
  "$after_bin/pure-bench" tpcc --engine sqlite --threads 1 --terminals 1 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-030 --json "$raw/sqlite.json" > "$raw/sqlite.txt" 2>&1
  echo "sqlite: $(grep -E 'transactions/s' "$raw/sqlite.txt" | cut -d';' -f1)"
  rm -rf /dev/shm/pure-030
  "$after_bin/pure-bench" tpcc --engine pure-inprocess --terminals 64 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-030 --app "$root/apps/tpcc" --json "$raw/inprocess.json" > "$raw/inprocess.txt" 2>&1
  echo "pure in-process: $(grep -E 'transactions/s' "$raw/inprocess.txt" | cut -d';' -f1);" \
    "$(grep -E 'CPU per' "$raw/inprocess.txt")"
  rm -rf /dev/shm/pure-030
}

# 5. On disk, 64 terminals, once each: grouped SQLite and Pure over HTTP, with the bytes each
#    writes to the device per transaction.
part 5 && for engine in sqlite-grouped pure; do
  rm -rf "$disk"; mkdir -p "$disk"
  "$after_bin/pure-bench" tpcc --engine $engine --terminals 64 --seconds 20 --warmup 5 \
    --dir "$disk" --app "$root/apps/tpcc" --json "$raw/disk-$engine.json" > "$raw/disk-$engine.txt" 2>&1
  echo "disk $engine: $(grep -E 'transactions/s' "$raw/disk-$engine.txt" | cut -d';' -f1);" \
    "$(grep -E 'bytes to the device' "$raw/disk-$engine.txt")"
  rm -rf "$disk"
done

# 6. The tail at equal load: New-Order in an open loop at 80% of SQLite's best closed-loop rate
#    of part 4 (as note 028 measured it), Pure over HTTP and in-process at 64 terminals, SQLite
#    on one connection driven by one terminal.
part 6 && {
  best=$(python3 -c "import json; print(int(json.load(open('$raw/sqlite.json'))['tx_per_s']))")
  rate=$((best * 80 / 100))
  for e in "pure --terminals 64" "pure-inprocess --terminals 64" "sqlite --threads 1 --terminals 1"; do
    name=$(echo "$e" | sed 's/ --terminals 64//' | tr ' ' '_' | tr -d '-')
    rm -rf /dev/shm/pure-030
    # shellcheck disable=SC2086
    "$after_bin/pure-bench" tpcc --engine $e --rate "$rate" --seconds 20 --warmup 5 \
      --dir /dev/shm/pure-030 --app "$root/apps/tpcc" --json "$raw/rate-80-$name.json" \
      > "$raw/rate-80-$name.txt" 2>&1
    echo "rate 80% ($rate tx/s) $e: $(grep -E 'new order ' "$raw/rate-80-$name.txt")"
  done
  rm -rf /dev/shm/pure-030
}
