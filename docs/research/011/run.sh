#!/bin/bash
# One hostile.py scenario against a fresh pure-serve (the scoreboard), output kept in raw/.
# usage: run.sh BINARY LABEL PORT -- hostile.py args...
#   BINARY  the pure-serve to measure (e.g. target/release/pure-serve of a clone at a commit)
#   LABEL   the name of the output: raw/LABEL.txt
# Extra server flags can go in SERVER_FLAGS.
set -u
binary=$1; label=$2; port=$3; shift 4
here=$(cd "$(dirname "$0")" && pwd)
app=$here/../../../apps/scoreboard
data=$(mktemp -d /tmp/hostile-data-XXXXXX)
log=$data.server.log
mkdir -p "$here/raw"; out=$here/raw/$label.txt
"$binary" "$app" --data "$data/d" --listen 127.0.0.1:$port --log-capacity 67108864 ${SERVER_FLAGS:-} > "$log" 2>&1 &
spid=$!
for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
{
echo "# $(date -Is) $binary ($(git -C "$(dirname "$binary")" rev-parse --short HEAD 2>/dev/null)), fresh server pid $spid ${SERVER_FLAGS:-}"
echo "# python3 hostile.py --url http://127.0.0.1:$port --pid $spid $*"
python3 "$here/hostile.py" --url http://127.0.0.1:$port --pid $spid "$@"
echo "# exit $?"
echo "# server log:"; sed 's/^/#   /' "$log" | head -20
} 2>&1 | tee "$out"
kill -TERM $spid; for _ in $(seq 150); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
kill -0 $spid 2>/dev/null && { echo "# server $spid did not stop in 15 s: SIGKILL" | tee -a "$out"; kill -KILL $spid; }
wait $spid; echo "# server exit $?" | tee -a "$out"
rm -rf "$data" "$log"
