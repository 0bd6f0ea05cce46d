#!/bin/sh
# Research 034: the owner's TPC-C calls before (BEFORE: a checkout of 250e8dd built into
# BEFORE_BIN) and after (this tree's target/release): callgrind's instructions per call of each
# kind, then the timed owner benchmark, TPC-C over HTTP in RAM, and SQLite's best against Pure
# in-process, alternating where both builds run.
#   sh docs/research/034/run.sh BEFORE BEFORE_BIN [PARTS]   (PARTS: "1 2 3 4")
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$(cd "$1" && pwd); before_bin=$(cd "$2" && pwd); parts=${3:-1 2 3 4}
part() { case " $parts " in *" $1 "*) return 0;; *) return 1;; esac; }
after_bin=$root/target/release
raw=$here/raw
mkdir -p "$raw"
bin() { if [ "$1" = before ]; then echo "$before_bin"; else echo "$after_bin"; fi; }
app() { if [ "$1" = before ]; then echo "$before/apps/tpcc"; else echo "$root/apps/tpcc"; fi; }

# 1. Instructions inside the owner's calls (the population's load is not collected), per call
#    of each kind; the writes weighted by the mix (45 New-Order, 43 Payment, 4 Delivery).
#    The final build three times (the count moves by a few hundred between runs: hash seeds).
part 1 && for s in before after-1 after-2 after-3; do
  b=${s%-*}
  (cd "$(dirname "$(app $b)")/.." && valgrind --tool=callgrind --callgrind-out-file="$raw/callgrind-$s" \
    --toggle-collect='*owner_turn_*' "$(bin $b)/pure-bench" owner --only tpcc \
    --transactions 5000 --tpcc-app "$(app $b)" > "$raw/callgrind-$s.txt" 2>&1)
  callgrind_annotate --inclusive=yes "$raw/callgrind-$s" 2>/dev/null \
    | python3 "$here/../030/per_call.py" "$raw/callgrind-$s.txt" | tee "$raw/per-call-$s.txt"
  gzip -f "$raw/callgrind-$s"
done

# 2. The owner's calls in-process, timed (3 pairs).
part 2 && for n in 1 2 3; do for s in before after; do
  (cd "$(dirname "$(app $s)")/.." && "$(bin $s)/pure-bench" owner --only tpcc --tpcc-app "$(app $s)" \
    --json "$raw/owner-$s-$n.json" > "$raw/owner-$s-$n.txt" 2>&1)
  echo "owner $s $n: $(grep weighted "$raw/owner-$s-$n.txt")"
done; done

# 3. TPC-C over HTTP in RAM, W=1, 64 terminals (3 pairs): tx/s and the server's CPU.
part 3 && for n in 1 2 3; do for s in before after; do
  rm -rf /dev/shm/pure-034
  "$(bin $s)/pure-bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-034 --app "$(app $s)" --json "$raw/http-$s-$n.json" > "$raw/http-$s-$n.txt" 2>&1
  echo "http $s $n: $(grep -E 'transactions/s' "$raw/http-$s-$n.txt" | cut -d';' -f1);" \
    "$(grep -E 'CPU per' "$raw/http-$s-$n.txt")"
done; done

# 4. SQLite's best closed-loop configuration (one connection, one terminal) and Pure
#    in-process at 64 terminals, alternating, three of each.
part 4 && for n in 1 2 3; do
  rm -rf /dev/shm/pure-034
  "$after_bin/pure-bench" tpcc --engine sqlite --threads 1 --terminals 1 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-034 --json "$raw/sqlite-$n.json" > "$raw/sqlite-$n.txt" 2>&1
  echo "sqlite $n: $(grep -E 'transactions/s' "$raw/sqlite-$n.txt" | cut -d';' -f1)"
  rm -rf /dev/shm/pure-034
  "$after_bin/pure-bench" tpcc --engine pure-inprocess --terminals 64 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-034 --app "$root/apps/tpcc" --json "$raw/inprocess-$n.json" > "$raw/inprocess-$n.txt" 2>&1
  echo "pure in-process $n: $(grep -E 'transactions/s' "$raw/inprocess-$n.txt" | cut -d';' -f1);" \
    "$(grep -E 'CPU per' "$raw/inprocess-$n.txt")"
done
rm -rf /dev/shm/pure-034
