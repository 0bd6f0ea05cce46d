#!/bin/sh
# Instructions per call of a variant script (script run minus the load-only run).
# Usage: docs/research/001/construct.sh <script.rhai> <load-only callgrind total>
set -eu
out=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$out" target/release/pure-bench owner \
  --only neworder --variant script --script "$1" --batch 500 --batches 2 >/dev/null 2>&1
total=$(grep -E '^summary:' "$out" | awk '{print $2}')
rm -f "$out"
echo "$(basename "$1"): $(( (total - $2) / 1000 )) instructions per call"
