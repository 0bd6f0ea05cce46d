#!/bin/sh
# Issue 17's three targets side by side on disk, ROUNDS rounds. Each round runs every engine
# once per target, in an order rotated by the round (so that no engine always follows the same
# one: research note 016 found the run after SQLite slow on this VM), each run after warm.py
# has touched and freed 1 GiB (016's "warm" runs). Raw lines go to stdout; summarize.py reads
# them.
#   sh docs/research/017/targets.sh DISK_DIR ROUNDS > OUT     (after cargo build --release)
set -u
disk=${1:-/work/kvdisk}
rounds=${2:-7}
bench=target/release/pure-bench
warm=docs/research/016/warm.py
engines="pure-http pure-in-process sqlite-4k sqlite-16k"
flags() {
  case $1 in
    pure-http) echo "--engine pure" ;;
    pure-in-process) echo "--engine pure --in-process" ;;
    sqlite-4k) echo "--engine sqlite --journal-mode wal --synchronous full --page-size 4096" ;;
    sqlite-16k) echo "--engine sqlite --journal-mode wal --synchronous full --page-size 16384" ;;
  esac
}
for round in $(seq "$rounds"); do
  order=$(echo $engines | tr ' ' '\n' | awk -v r="$round" '{a[NR]=$0} END {for (i=0;i<NR;i++) print a[(i+r)%NR+1]}')
  for engine in $order; do
    sync; sleep 1; python3 "$warm" 1024
    $bench kv $(flags $engine) --dir "$disk/run" --quiet --num 300000 --reads 300000 \
      --benchmarks fillbatch,readrandom 2>/dev/null | grep -E "^(fillbatch|readrandom)" \
      | sed "s/^/round $round $engine 1 /"
    sync; sleep 1; python3 "$warm" 1024
    $bench kv $(flags $engine) --dir "$disk/run" --quiet --num 100000 --writes 30000 \
      --threads 16 --benchmarks fillbatch,overwrite 2>/dev/null | grep -E "^overwrite" \
      | sed "s/^/round $round $engine 16 /"
  done
done
