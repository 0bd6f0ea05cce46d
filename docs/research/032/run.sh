#!/bin/sh
# Research note 032: the owner hands a group of HANDOVER_WRITES writes to a syncer that waits.
#
# sh docs/research/032/run.sh BEFORE_BIN AFTER_BIN [PAIRS] [DISK]
#   BEFORE_BIN, AFTER_BIN: directories holding pure-bench and pure-serve (release builds)
#   PAIRS: alternating pairs of runs (default 2); DISK: a directory on the block device
# Run from the repository's root. Raw outputs go to docs/research/032/raw/.
# (The threshold sweep of the note was run on a build that read the threshold from the
# environment, PURE_HANDOVER, now gone: its outputs are raw/ho-*.txt.)
set -eu
before=$1; after=$2; pairs=${3:-2}; disk=${4:-/work/tmp/pure-032}
root=$(pwd); raw=$root/docs/research/032/raw
mkdir -p "$raw" "$disk"
run() { # side engine place dir seconds
  bin=$before; [ "$1" = after ] && bin=$after
  out="$raw/$2-$3-$1-$i.txt"
  rm -rf "$4"
  "$bin/pure-bench" tpcc --engine "$2" --terminals 64 --seconds "$5" --warmup 3 \
    --dir "$4" --app "$root/apps/tpcc" > "$out" 2>&1
  echo "$2 $3 $1 $i: $(grep -E 'transactions/s' "$out" | cut -d';' -f1);" \
    "$(grep -E 'CPU per|owner held|commits/s' "$out" | tr '\n' ' ')"
  rm -rf "$4"
}
for i in $(seq "$pairs"); do
  for side in before after; do run $side pure-inprocess ram /dev/shm/pure-032 10; done
  for side in before after; do run $side pure ram /dev/shm/pure-032 10; done
  for side in before after; do run $side pure disk "$disk/run" 20; done
done
