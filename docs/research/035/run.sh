#!/bin/sh
# Research note 035: a log that starts small and grows in place, against one made at its size.
#
# sh docs/research/035/run.sh BEFORE_BIN AFTER_BIN [PARTS] [DISK]
#   BEFORE_BIN, AFTER_BIN: directories holding pure-bench and pure-serve (release builds); the
#       before build preallocates 256 MiB for every new directory, the after build 1 MiB
#   PARTS: which parts to run (default "1 2 3")
#   DISK: a directory on the block device to measure (default /work/tmp/pure-035; /work is on
#         the virtio disk vda here)
# Run from the repository's root. Raw outputs go to docs/research/035/raw/.
set -eu
before=$1; after=$2; parts=${3:-1 2 3}; disk=${4:-/work/tmp/pure-035}
root=$(pwd); raw=$root/docs/research/035/raw
mkdir -p "$raw" "$disk"
part() { case " $parts " in *" $1 "*) return 0;; esac; return 1; }

# 1. What a new directory takes, and what it takes after writes: the scoreboard served on a
#    fresh directory (before and after), then 20,000 posts from one client, the log file's size
#    after each, and 60,000 more.
#    The third side is the after build with --checkpoint-interval 4 MiB.
part 1 && for side in before after after-interval4; do
  bin=$before; [ $side != before ] && bin=$after
  flags=""; [ $side = after-interval4 ] && flags="--checkpoint-interval 4194304"
  rm -rf "$disk/sb"
  # shellcheck disable=SC2086
  "$bin/pure-serve" "$root/apps/scoreboard" --data "$disk/sb" --listen 127.0.0.1:18035 $flags \
    > "$raw/size-$side.out" 2> "$raw/size-$side.err" &
  pid=$!
  for i in $(seq 1 100); do
    curl -s -o /dev/null http://127.0.0.1:18035/top && break; sleep 0.1
  done
  echo "$side new: $(stat -c %s "$disk/sb/log") bytes, $(du -k "$disk/sb/log" | cut -f1) KiB on disk" | tee -a "$raw/size.txt"
  python3 "$root/docs/research/035/posts.py" 18035 20000
  echo "$side after 20000 posts: $(stat -c %s "$disk/sb/log") bytes" | tee -a "$raw/size.txt"
  python3 "$root/docs/research/035/posts.py" 18035 60000
  echo "$side after 80000 posts: $(stat -c %s "$disk/sb/log") bytes, $(ls "$disk/sb" | grep -c ckpt) checkpoint file(s)" | tee -a "$raw/size.txt"
  kill $pid; wait $pid || true
done

# 2. The commit path on a grown ring: pure-bench log with each store's log grown from 1 MiB to
#    64 MiB before measuring, then made at 64 MiB, alternating, three runs each; the ratio to
#    the raw device loop measured in the same run is the figure.
part 2 && for i in 1 2 3; do
  for from in 1 64; do
    "$after/pure-bench" log --dir "$disk" --seconds 3 --grown-from-mib $from \
      --json "$raw/log-from$from-$i.json" > "$raw/log-from$from-$i.txt" 2>&1
    echo "log from $from MiB, run $i:"; grep -E "raw|store, group" "$raw/log-from$from-$i.txt" | head -8
  done
done

# 3. TPC-C on disk, W=1, 64 terminals, 20 s after 5 s of warm-up, from a fresh directory (the
#    after build's log grows during the run), before and after alternating, three pairs.
part 3 && for i in 1 2 3; do
  for side in before after; do
    bin=$before; [ $side = after ] && bin=$after
    rm -rf "$disk/run"
    "$bin/pure-bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 \
      --dir "$disk/run" --app "$root/apps/tpcc" --json "$raw/tpcc-$side-$i.json" > "$raw/tpcc-$side-$i.txt" 2>&1
    echo "tpcc $side $i: $(grep -E 'transactions/s' "$raw/tpcc-$side-$i.txt" | cut -d';' -f1);" \
      "$(grep -E 'bytes to the device' "$raw/tpcc-$side-$i.txt");" \
      "$(grep -E 'p99.9|max' "$raw/tpcc-$side-$i.txt" | head -2 | tr '\n' ' ')"
  done
done
