#!/usr/bin/env bash
# The README's quickstart, as written: its commands on configs/quickstart.yaml run in the order
# the README gives them, in a fresh folder holding only configs/ and the built trainer, and each
# succeeds (the second must not collide with the first's run; eval and predict find its run).
# `tools/dev run` is the first command's spelling of `trainer run configs/quickstart.yaml`.
# usage: readme_quickstart.sh TRAINER_BIN SOURCE_DIR
set -u
bin="$1"
src="$2"
t="$(mktemp -d /tmp/trainer-readme-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"

mkdir -p "$t/build/bin"
cp -r "$src/configs" "$t/configs"
ln -s "$bin" "$t/build/bin/trainer"
cmds="$(awk '/^## Quickstart/ {q = 1} q && /^```/ {n++; next} q && n == 1' "$src/README.md" |
        grep 'configs/quickstart.yaml' | sed 's/[[:space:]]*#.*//')"
[ "$(printf '%s\n' "$cmds" | wc -l)" -ge 3 ] || { bad "the README's quickstart block names configs/quickstart.yaml" "$cmds"; finish; exit; }
i=0
while IFS= read -r c; do
    i=$((i + 1))
    [ "$c" = "tools/dev run" ] && c="build/bin/trainer run configs/quickstart.yaml"
    (cd "$t" && eval "timeout 600 $c trainer.progress=lines" >"$t/out$i.log" 2>&1)
    rc=$?
    if [ "$rc" = 0 ]; then ok "README quickstart command $i: $c"
    else bad "README quickstart command $i: $c" "exit $rc" "$(tail -3 "$t/out$i.log")"; fi
done <<<"$cmds"
[ -s "$t/preds.csv" ] && ok "predict wrote preds.csv" || bad "predict wrote preds.csv"
finish
