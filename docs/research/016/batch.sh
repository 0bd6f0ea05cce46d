#!/bin/sh
# fillbatch (300,000 entries, batches of 1,000, one thread, durable) side by side, in rounds whose
# order of engines rotates, each run either "cold" (after sync and a second's pause, as the
# targets of research 015 ran) or "warm" (the same, then docs/research/016/warm.py touching and
# freeing 1 GiB just before it: see that file for why).
#   docs/research/016/batch.sh DISK_DIR ROUNDS [OLD_PURE_BENCH] > docs/research/016/batch.txt
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-4}
old=${3:-}
bench=target/release/pure-bench
here=$(dirname "$0")
engines="pure-http pure-in-process sqlite-4k sqlite-16k"
[ -n "$old" ] && engines="$engines old-pure-http"
run() {
  case $1 in
    pure-http) $bench kv --engine pure --dir "$disk/run" --quiet --num 300000 --benchmarks fillbatch ;;
    old-pure-http) $old kv --engine pure --dir "$disk/run" --quiet --num 300000 --benchmarks fillbatch ;;
    pure-in-process) $bench kv --engine pure --in-process --dir "$disk/run" --quiet --num 300000 --benchmarks fillbatch ;;
    sqlite-4k) $bench kv --engine sqlite --journal-mode wal --synchronous full --page-size 4096 --dir "$disk/run" --quiet --num 300000 --benchmarks fillbatch ;;
    sqlite-16k) $bench kv --engine sqlite --journal-mode wal --synchronous full --page-size 16384 --dir "$disk/run" --quiet --num 300000 --benchmarks fillbatch ;;
  esac 2>/dev/null | grep -E "^fillbatch"
}
for round in $(seq "$rounds"); do
  for mode in cold warm; do
    # Rotate the order by the round, so that no engine always follows the same one.
    order=$(echo $engines | tr ' ' '\n' | awk -v r="$round" '{a[NR]=$0} END {for (i=0;i<NR;i++) print a[(i+r)%NR+1]}')
    for engine in $order; do
      sync; sleep 1
      [ $mode = warm ] && python3 "$here/warm.py" 1024
      echo "round $round $mode $engine $(run $engine)"
    done
  done
done
