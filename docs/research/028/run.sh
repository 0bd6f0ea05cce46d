#!/bin/sh
# Research 028: the owner's calls and TPC-C over HTTP, before (BEFORE: a checkout of 767b5f2
# built into BEFORE_BIN) and after (this tree's target/release), alternating; then the tail at
# equal load (--rate) at 50% and 80% of SQLite's best closed-loop rate.
#   sh docs/research/028/run.sh BEFORE BEFORE_BIN [PARTS]   (PARTS: "1 2 3" by default)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
before=$1; before_bin=$2; parts=${3:-1 2 3}
part() { case " $parts " in *" $1 "*) return 0;; *) return 1;; esac; }
after_bin=$root/target/release
raw=$here/raw
mkdir -p "$raw"
bin() { if [ "$1" = before ]; then echo "$before_bin"; else echo "$after_bin"; fi; }
app() { if [ "$1" = before ]; then echo "$before/apps/tpcc"; else echo "$root/apps/tpcc"; fi; }

# 1. The owner's calls in-process, timed (3 pairs).
part 1 && for n in 1 2 3; do for s in before after; do
  "$(bin $s)/pure-bench" owner --only tpcc --tpcc-app "$(app $s)" --json "$raw/owner-$s-$n.json" \
    > "$raw/owner-$s-$n.txt" 2>&1
  echo "owner $s $n: $(grep weighted "$raw/owner-$s-$n.txt")"
done; done

# 2. TPC-C over HTTP in RAM, W=1, 64 terminals (3 pairs).
part 2 && for n in 1 2 3; do for s in before after; do
  rm -rf /dev/shm/pure-028
  "$(bin $s)/pure-bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 \
    --dir /dev/shm/pure-028 --app "$(app $s)" --json "$raw/http-$s-$n.json" > "$raw/http-$s-$n.txt" 2>&1
  echo "http $s $n: $(grep -E 'transactions/s' "$raw/http-$s-$n.txt" | cut -d';' -f1);" \
    "$(grep -E 'CPU per' "$raw/http-$s-$n.txt")"
done; done

# 3. SQLite's best closed-loop rate in RAM (its two engines, as the matrix runs them), then
#    every engine at 50% and 80% of it, an open loop.
part 3 || exit 0
best=0
for e in "sqlite-grouped --terminals 64" "sqlite --threads 1" "sqlite --threads 2"; do
  name=$(echo "$e" | tr ' ' '_' | tr -d '-')
  rm -rf /dev/shm/pure-028
  # shellcheck disable=SC2086
  "$after_bin/pure-bench" tpcc --engine $e --seconds 20 --warmup 5 --dir /dev/shm/pure-028 \
    --json "$raw/sqlite-$name.json" > "$raw/sqlite-$name.txt" 2>&1
  rate=$(python3 -c "import json; print(int(json.load(open('$raw/sqlite-$name.json'))['tx_per_s']))")
  echo "sqlite $e: $rate tx/s"
  if [ "$rate" -gt "$best" ]; then best=$rate; fi
done
echo "SQLite's best: $best tx/s"
for share in 50 80; do
  rate=$((best * share / 100))
  # SQLite on one connection is driven by one terminal, as its best closed-loop rate was: 64
  # terminals on one connection wait for it in no order, and reach a fifth of that rate.
  for e in "pure --terminals 64" "pure-inprocess --terminals 64" "sqlite-grouped --terminals 64" \
           "sqlite --threads 1 --terminals 1"; do
    name=$(echo "$e" | sed 's/ --terminals 64//' | tr ' ' '_' | tr -d '-')
    rm -rf /dev/shm/pure-028
    # shellcheck disable=SC2086
    "$after_bin/pure-bench" tpcc --engine $e --rate "$rate" --seconds 20 --warmup 5 \
      --dir /dev/shm/pure-028 --app "$root/apps/tpcc" --json "$raw/rate-$share-$name.json" \
      > "$raw/rate-$share-$name.txt" 2>&1
    echo "rate $share% ($rate tx/s) $e: $(grep -E 'new order ' "$raw/rate-$share-$name.txt")"
  done
done
rm -rf /dev/shm/pure-028
