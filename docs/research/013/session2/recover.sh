#!/bin/bash
# usage: [PURE_ENV="VAR=value"] recover.sh DATA_DIR : starts pure-serve on the TPC-C app, prints its recovery line, stops it.
# DATA_DIR: pure-bench tpcc --engine pure-inprocess --warehouses 4 --seconds 2 --warmup 0 --keep --dir /dev/shm/w4, then /dev/shm/w4/pure
d=$1
env $PURE_ENV /work/main/target/release/pure-serve /work/main/apps/tpcc --data $d --listen 127.0.0.1:18099 > /tmp/rec.out 2> /tmp/rec.err &
pid=$!
for i in $(seq 1 600); do grep -q listening /tmp/rec.out && break; sleep 0.1; done
grep recovered /tmp/rec.err
kill -TERM $pid; wait $pid
