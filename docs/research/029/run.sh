#!/bin/sh
# Research 029: the owner's calls before (BEFORE: a checkout of 5293b57 built into BEFORE_BIN)
# and after (this tree's target/release): callgrind's instructions per call of each kind, then
# the timed owner benchmark, alternating.
#   sh docs/research/029/run.sh BEFORE BEFORE_BIN [PARTS]   (PARTS: "1 2" by default)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1; before_bin=$2; parts=${3:-1 2}
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
