#!/bin/sh
# The sweep of research note 015: every SQLite journal mode x page size x synchronous against
# Pure's sync modes over HTTP and in-process, at 1 and 16 threads, in RAM and on disk; then the
# three targets side by side, repeated.
#   docs/research/015/run.sh RAM_DIR DISK_DIR OUT
# RAM_DIR on tmpfs (/dev/shm), DISK_DIR on the block device under test. Builds first.
set -eu
ram=${1:-/dev/shm/kv015}
disk=${2:-/work/kvdisk}
out=${3:-docs/research/015}
cargo build --release -p pure-serve -p pure-bench
bench=target/release/pure-bench
sweep="--num 20000 --writes 5000 --threads 1,16"
$bench kv-sweep --dir "$ram" --out "$out/ram" $sweep > "$out/ram.txt"
$bench kv-sweep --dir "$disk" --out "$out/disk" $sweep > "$out/disk.txt"
rm -rf "$ram"
docs/research/015/targets.sh "$disk" "$out"

