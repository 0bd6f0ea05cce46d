#!/usr/bin/env bash
# The SQLite sweep of note 012 (criteria.md): each setting varied alone from the tuned preset,
# 3 runs of 20 s after 5 s of warm-up per point, W=1. `sqlite` on 1 connection in RAM
# (/dev/shm), `sqlite-grouped` at 16 terminals on disk (DISK, default /work/tpcc-sweep).
# Writes OUT/<engine>-<point>-<run>.json (default OUT: the sweep/ folder beside this script);
# summarize with sweep.py. Run from the repository's root after `cargo build --release`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$here/sweep}"
disk="${DISK:-/work/tpcc-sweep}"
runs="${RUNS:-3}"
bench="${BENCH:-target/release/pure-bench}"
mkdir -p "$out" "$disk"

points=(
  "base|"
  "journal-delete|--sqlite-journal-mode=delete"
  "journal-truncate|--sqlite-journal-mode=truncate"
  "journal-persist|--sqlite-journal-mode=persist"
  "page-1k|--sqlite-page-size=1024"
  "page-16k|--sqlite-page-size=16384"
  "mmap-0|--sqlite-mmap-size=0"
  "cache-2m|--sqlite-cache-size=2000"
  "cache-256m|--sqlite-cache-size=262144"
  "ckpt-1000|--sqlite-wal-autocheckpoint=1000"
  "ckpt-160mb|--sqlite-wal-autocheckpoint=39062"
  "exclusive|--sqlite-locking-mode=exclusive"
)

for k in $(seq 1 "$runs"); do
  for point in "${points[@]}"; do
    name="${point%%|*}"
    flags="${point#*|}"
    for engine in sqlite sqlite-grouped; do
      # One connection per file only: exclusive locking is for the grouped engine.
      if [[ $name == exclusive && $engine == sqlite ]]; then continue; fi
      json="$out/$engine-$name-$k.json"
      [[ -e $json ]] && continue
      if [[ $engine == sqlite ]]; then
        where=/dev/shm/tpcc-sweep-run; extra=(--threads 1)
      else
        where="$disk/run"; extra=(--terminals 16)
      fi
      rm -rf "$where"
      echo "== $engine $name run $k" >&2
      # shellcheck disable=SC2086
      $bench tpcc --engine "$engine" --warehouses 1 --seconds 20 --warmup 5 \
        --dir "$where" "${extra[@]}" $flags --json "$json" > "$out/$engine-$name-$k.txt"
    done
  done
done
