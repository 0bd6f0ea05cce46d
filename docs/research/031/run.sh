#!/bin/sh
# Research note 031: what TPC-C writes to the device per transaction, before and after.
#
# sh docs/research/031/run.sh BEFORE_BIN AFTER_BIN [PARTS] [DISK]
#   BEFORE_BIN, AFTER_BIN: directories holding pure-bench and pure-serve (release builds)
#   PARTS: which parts to run (default "1 2 3 4")
#   DISK: a directory on the block device to measure (default /work/tmp/pure-031; /work is on
#         the virtio disk vda here)
# Run from the repository's root. Raw outputs go to docs/research/031/raw/.
set -eu
before=$1; after=$2; parts=${3:-1 2 3 4}; disk=${4:-/work/tmp/pure-031}
root=$(pwd); raw=$root/docs/research/031/raw
mkdir -p "$raw" "$disk"
part() { case " $parts " in *" $1 "*) return 0;; esac; return 1; }

# 1. The device's side alone: 3,000 syncs of frames of about 3,100 bytes (a TPC-C group of
#    5.5 writes), written through the page cache, then whole 512-byte sectors with O_DIRECT,
#    twice each; bytes from /proc/diskstats.
part 1 && for i in 1 2; do
  for mode in buffered direct; do
    python3 "$root/docs/research/031/sectors.py" $mode 3000 3100 "$disk/sectors.log" | tee -a "$raw/sectors.txt"
  done
done

# 2. On disk, W=1, 64 terminals, the issue's 20 s window after 5 s of warm-up: before and after
#    alternating, three pairs, then grouped SQLite three times.
part 2 && for i in 1 2 3; do
  for side in before after; do
    bin=$before; [ $side = after ] && bin=$after
    rm -rf "$disk/run"
    "$bin/pure-bench" tpcc --engine pure --terminals 64 --seconds 20 --warmup 5 \
      --dir "$disk/run" --app "$root/apps/tpcc" --json "$raw/disk-$side-$i.json" > "$raw/disk-$side-$i.txt" 2>&1
    echo "disk $side $i: $(grep -E 'transactions/s' "$raw/disk-$side-$i.txt" | cut -d';' -f1);" \
      "$(grep -E 'bytes to the device' "$raw/disk-$side-$i.txt");" \
      "$(grep -E 'checkpoints in the window' "$raw/disk-$side-$i.txt")"
  done
done
part 2 && for i in 1 2 3; do
  rm -rf "$disk/run"
  "$after/pure-bench" tpcc --engine sqlite-grouped --terminals 64 --seconds 20 --warmup 5 \
    --dir "$disk/run" --app "$root/apps/tpcc" --json "$raw/disk-sqlite-$i.json" > "$raw/disk-sqlite-$i.txt" 2>&1
  echo "disk sqlite-grouped $i: $(grep -E 'transactions/s' "$raw/disk-sqlite-$i.txt" | cut -d';' -f1);" \
    "$(grep -E 'bytes to the device' "$raw/disk-sqlite-$i.txt")"
done

# 3. A longer window (60 s), once each, where checkpoints of a grown state fall in it.
part 3 && for side in before after; do
  bin=$before; [ $side = after ] && bin=$after
  rm -rf "$disk/run"
  "$bin/pure-bench" tpcc --engine pure --terminals 64 --seconds 60 --warmup 5 \
    --dir "$disk/run" --app "$root/apps/tpcc" --json "$raw/long-$side.json" > "$raw/long-$side.txt" 2>&1
  echo "60 s $side: $(grep -E 'transactions/s' "$raw/long-$side.txt" | cut -d';' -f1);" \
    "$(grep -E 'bytes to the device' "$raw/long-$side.txt");" \
    "$(grep -E 'checkpoints in the window' "$raw/long-$side.txt")"
done

# 4. What a crash costs after: a 30 s run kept, then the server started on its directory, which
#    decodes the last checkpoint and replays the log after it; and the log's frames counted.
part 4 && {
  rm -rf "$disk/run"
  "$after/pure-bench" tpcc --engine pure --terminals 64 --seconds 30 --warmup 5 --keep \
    --dir "$disk/run" --app "$root/apps/tpcc" > "$raw/kept.txt" 2>&1
  python3 "$root/docs/research/031/logstat.py" "$disk/run/pure/log" > "$raw/logstat.txt"
  ls -l "$disk/run/pure" >> "$raw/logstat.txt"
  "$after/pure-serve" "$root/apps/tpcc" --data "$disk/run/pure" --listen 127.0.0.1:18031 \
    > /dev/null 2> "$raw/recovery.txt" &
  server=$!
  sleep 30
  kill $server; wait $server || true
  grep -E 'recovered' "$raw/recovery.txt"
  rm -rf "$disk/run"
}

# 5. The last build (AFTER_BIN) against grouped SQLite, alternating, three pairs of 20 s windows;
#    then a 60 s window; then a kept 30 s run's recovery, as in part 4.
part 5 && for i in 1 2 3; do
  for engine in pure sqlite-grouped; do
    rm -rf "$disk/run"
    "$after/pure-bench" tpcc --engine $engine --terminals 64 --seconds 20 --warmup 5 \
      --dir "$disk/run" --app "$root/apps/tpcc" --json "$raw/last-$engine-$i.json" > "$raw/last-$engine-$i.txt" 2>&1
    echo "last $engine $i: $(grep -E 'transactions/s' "$raw/last-$engine-$i.txt" | cut -d';' -f1);" \
      "$(grep -E 'bytes to the device' "$raw/last-$engine-$i.txt");" \
      "$(grep -E 'checkpoints in the window' "$raw/last-$engine-$i.txt")"
  done
done
part 5 && {
  rm -rf "$disk/run"
  "$after/pure-bench" tpcc --engine pure --terminals 64 --seconds 60 --warmup 5 \
    --dir "$disk/run" --app "$root/apps/tpcc" --json "$raw/last-long.json" > "$raw/last-long.txt" 2>&1
  echo "last 60 s: $(grep -E 'transactions/s' "$raw/last-long.txt" | cut -d';' -f1);" \
    "$(grep -E 'bytes to the device' "$raw/last-long.txt");" \
    "$(grep -E 'checkpoints in the window' "$raw/last-long.txt")"
  rm -rf "$disk/run"
  "$after/pure-bench" tpcc --engine pure --terminals 64 --seconds 30 --warmup 5 --keep \
    --dir "$disk/run" --app "$root/apps/tpcc" > "$raw/last-kept.txt" 2>&1
  python3 "$root/docs/research/031/logstat.py" "$disk/run/pure/log" > "$raw/last-logstat.txt"
  ls -l "$disk/run/pure" >> "$raw/last-logstat.txt"
  "$after/pure-serve" "$root/apps/tpcc" --data "$disk/run/pure" --listen 127.0.0.1:18031 \
    > /dev/null 2> "$raw/last-recovery.txt" &
  server=$!
  sleep 30
  kill $server; wait $server || true
  grep -E 'recovered' "$raw/last-recovery.txt"
  rm -rf "$disk/run"
}
