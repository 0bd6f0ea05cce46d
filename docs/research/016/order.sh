#!/bin/sh
# fillbatch 300k over HTTP: before (the build of 883a201, pure-bench and pure-serve copied to
# /tmp/fb/old) and after (target/release), SQLite WAL FULL 16K beside, in rounds; ORDER sets the
# order of the engines in a round (the default runs the old build first).
cd "$(dirname "$0")/../../.."
for i in 1 2 3 4 5 6; do
  for b in ${ORDER:-/tmp/fb/old/pure-bench ./target/release/pure-bench sqlite}; do
    rm -rf /tmp/fb/o; sync; sleep 1
    if [ $b = sqlite ]; then
      echo "round $i sqlite16k $(./target/release/pure-bench kv --engine sqlite --journal-mode wal --synchronous full --page-size 16384 --dir /tmp/fb/o --num 300000 --benchmarks fillbatch 2>&1 | grep ^fillbatch)"
    else
      echo "round $i $b $($b kv --engine pure --dir /tmp/fb/o --num 300000 --benchmarks fillbatch 2>&1 | grep ^fillbatch)"
    fi
  done
done
