#!/bin/sh
# Runs slow_readers.py RUNS times against a fresh pure-serve (the kv app) and keeps each run's
# figures as JSON in raw/NAME-N.json.
#   sh docs/research/021/run.sh NAME PURE_SERVE_BINARY [RUNS] [-- extra pure-serve flags]
set -eu
name=$1; binary=$2; runs=${3:-3}
shift 2; [ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
port=18321
for n in $(seq 1 "$runs"); do
  data=$(mktemp -d)
  "$binary" "$root/apps/kv" --data "$data" --listen 127.0.0.1:$port --log-capacity 8388608 "$@" \
    >/dev/null 2>&1 &
  pid=$!
  sleep 2
  python3 "$here/slow_readers.py" --port $port --pid $pid --json "$here/raw/$name-$n.json"
  kill $pid; wait $pid || true
  rm -rf "$data"
done
