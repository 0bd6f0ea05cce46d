#!/bin/bash
# Instructions per `post_score` call of an app directory's scoreboard handler, in-process
# (`pure-bench owner --only scoreboard`): callgrind of 2,000 calls minus callgrind of the load alone.
# usage: docs/research/004/instructions.sh APP_DIR|VARIANT.rhai LABEL   (OUT=dir for the .out files, default /tmp)
# A .rhai file is run as the scoreboard app with that file in place of scores.rhai.
set -e
APP=$1; L=$2; O=${OUT:-/tmp}
if [[ $APP == *.rhai ]]; then
  DIR=$(mktemp -d); cp "$(dirname "$0")/../../../apps/scoreboard/app.json" "$DIR/"; cp "$APP" "$DIR/scores.rhai"; APP=$DIR
fi
B="$(dirname "$0")/../../../target/release/pure-bench"
for v in load script; do
  valgrind --tool=callgrind --callgrind-out-file="$O/cg.$L.$v.out" "$B" owner --only scoreboard \
    --app "$APP" --variant $v --batch 500 --batches 4 > "$O/cg.$L.$v.log" 2>&1
done
a=$(grep summary "$O/cg.$L.load.out" | awk '{print $2}'); b=$(grep summary "$O/cg.$L.script.out" | awk '{print $2}')
echo "$L: $(( (b - a) / 2000 )) instructions per call"
