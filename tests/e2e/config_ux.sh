#!/usr/bin/env bash
# Config UX: list items in overrides (optimizer.betas[1]=0.99), `plugins:` naming a .so file,
# a UTF-8 BOM, the --help of the config commands, and the run folder's config.yaml running
# again from another working directory (its paths made absolute) on the same data.
# usage: config_ux.sh TRAINER_BIN TEST_PLUGIN_DIR   (needs no data from shared/)
set -u
bin="$(realpath "$1")"; plugdir="$(realpath "$2")"
t="$(mktemp -d /tmp/trainer-cfgux-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
mkdir -p "$t/proj/data" "$t/proj/myplug" "$t/elsewhere"
{ echo "a,b,c,label"; for i in $(seq 0 199); do echo "$((i % 7)).5,$((i % 5)).25,$((i % 3)),$(( (i % 7) > 3 ))"; done; } >"$t/proj/data/train.csv"
cat >"$t/proj/c.yaml" <<YAML
run: {name: csvrun, output_dir: out}
model: {name: mlp, params: {layers: [8]}}
data: {name: csv, params: {path: data/train.csv}, batch_size: 32}
trainer: {max_steps: 3, progress: lines, threads: 1}
plugins: [myplug]
YAML

# 1. List items by index: betas[1] alone (betas[0] keeps its default), an append.
out="$(cd "$t" && "$bin" run proj/c.yaml 'optimizer.betas[1]=0.99' 'model.params.layers[1]=4' 2>&1)"; rc=$?
cfg="$t/out/csvrun/0/config.yaml"
betas="$(grep -A2 '^  betas:' "$cfg" 2>/dev/null | tail -2 | tr -d ' \n')"
layers="$(grep -A2 '^    layers:' "$cfg" 2>/dev/null | tail -2 | tr -d ' \n')"
if [ "$rc" = 0 ] && [ "$betas" = "-0.9-0.99" ] && [ "$layers" = "-8-4" ]; then ok "optimizer.betas[1]=0.99 -> betas [0.9, 0.99]; layers[1]=4 appends -> [8, 4]"
else bad "index overrides (exit $rc, betas '$betas', layers '$layers')" "$(tail -3 <<<"$out")"; fi

# 2. The resolved config.yaml holds absolute paths and runs from elsewhere on the same data.
if grep -q "^  output_dir: $t/out$" "$cfg" && grep -q "^    path: $t/proj/data/train.csv$" "$cfg" && grep -q "^  - $t/proj/myplug$" "$cfg"; then
    ok "config.yaml: output_dir, data path and plugin folder absolute"
else bad "config.yaml paths" "$(grep -n 'output_dir\|path:\|myplug' "$cfg")"; fi
a="$(cd "$t" && "$bin" eval proj/c.yaml --checkpoint out/csvrun/0 'optimizer.betas[1]=0.99' 'model.params.layers[1]=4' 2>&1 | grep -o 'samples: loss.*')"
b="$(cd "$t/elsewhere" && "$bin" eval "$cfg" --checkpoint "$t/out/csvrun/0" 2>&1 | grep -o 'samples: loss.*')"
if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "eval with the run's config.yaml from another folder: $b"
else bad "eval from elsewhere" "original: $a" "run's config: $b"; fi
out="$(cd "$t/elsewhere" && "$bin" run "$cfg" run.name=again 2>&1)"; rc=$?
a="$(grep -o '"train_loss": [^}]*' "$t/out/csvrun/0/metrics.jsonl" 2>/dev/null)"
b="$(grep -o '"train_loss": [^}]*' "$t/out/again/0/metrics.jsonl" 2>/dev/null)"
if [ "$rc" = 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && [ ! -e "$t/elsewhere/out" ]; then
    ok "run with the run's config.yaml from another folder: the same training ($b), in the same output_dir"
else bad "run from elsewhere (exit $rc)" "first: $a" "again: $b" "$(tail -3 <<<"$out")"; fi

# 3. plugins: naming a plugin file loads that file.
cp "$t/proj/c.yaml" "$t/proj/so.yaml"; sed -i "s|^plugins: .*|plugins: [$plugdir/good/fake_strategy.so]|" "$t/proj/so.yaml"
out="$("$bin" run "$t/proj/so.yaml" trainer.strategy=fake_strategy 2>&1)"
if grep -q "fake_strategy.so: strategy fake_strategy: its ops table" <<<"$out"; then ok "plugins: [.../fake_strategy.so] loads that file"
else bad "plugins: a .so file" "$out"; fi

# 4. A UTF-8 byte order mark: accepted, and positions count from the first key.
printf '\xef\xbb\xbf' >"$t/bom.yaml"; cat "$t/proj/c.yaml" >>"$t/bom.yaml"; sed -i 's|data/train.csv|proj/data/train.csv|; s|myplug|proj/myplug|' "$t/bom.yaml"
out="$(cd "$t" && "$bin" run "$t/bom.yaml" run.name=bom 2>&1)"; rc=$?
printf '\xef\xbb\xbfrunn: {name: x}\n' >"$t/bom2.yaml"
out2="$("$bin" run "$t/bom2.yaml" 2>&1)"
if [ "$rc" = 0 ] && grep -q "bom2.yaml:1:1: runn: unknown key" <<<"$out2"; then ok "BOM: runs; an error on line 1 is at column 1"
else bad "BOM (exit $rc)" "$(tail -2 <<<"$out")" "$out2"; fi

# 5. --help of the config commands: the sections and docs/config.md.
for c in run eval predict plan; do
    out="$("$bin" $c --help 2>&1)"; rc=$?
    n=0; for s in run model data optimizer scheduler trainer strategy checkpoint plugins; do grep -q "^  $s  *[a-z]" <<<"$out" && n=$((n + 1)); done
    if [ "$rc" = 0 ] && [ "$n" = 9 ] && grep -q "docs/config.md" <<<"$out" && grep -q "^usage: trainer $c CONFIG.yaml" <<<"$out"; then ok "trainer $c --help: usage, 9 sections, docs/config.md"
    else bad "trainer $c --help (exit $rc, $n sections)" "$out"; fi
done
# 6. Only path options are made absolute: a csv label column named like a folder beside the
# config (label: target, folder target/) stays a column name, in training and in config.yaml.
mkdir -p "$t/lbl/target"
{ echo "a,b,target"; for i in $(seq 0 99); do echo "$((i % 7)).5,$((i % 3)),$((i % 2))"; done; } >"$t/lbl/train.csv"
cat >"$t/lbl/c.yaml" <<YAML
run: {name: lbl, output_dir: $t/lbl/out}
model: {name: mlp, params: {layers: [8]}}
data: {name: csv, params: {path: train.csv, label: target}, batch_size: 20}
trainer: {max_steps: 2, progress: lines, threads: 1}
YAML
out="$(cd "$t/elsewhere" && "$bin" run "$t/lbl/c.yaml" 2>&1)"; rc=$?
if [ "$rc" = 0 ] && grep -q "^    label: target$" "$t/lbl/out/lbl/0/config.yaml" && grep -q "^    path: $t/lbl/train.csv$" "$t/lbl/out/lbl/0/config.yaml"; then
    ok "label: target beside a folder target/ stays a column name; path made absolute"
else bad "a string option naming an existing folder (exit $rc)" "$(tail -2 <<<"$out")"; fi
# 7. key[N] on a list the config does not set: the items before N take the default's items
# (docs/config.md), never vanish. mlp's layers default to [512, 512]: layers[1]=4 is [512, 4]
# (3*512+512 + 512*4+4 + 4*2+2 = 4110 parameters), not [4] (26).
sed 's/params: {layers: \[8\]}/params: {}/' "$t/proj/c.yaml" >"$t/proj/nolayers.yaml"
out="$(cd "$t" && "$bin" run proj/nolayers.yaml run.name=nolayers 'model.params.layers[1]=4' 2>&1)"; rc=$?
if [ "$rc" = 0 ] && grep -q "model mlp (4110 parameters)" <<<"$out"; then ok "layers[1]=4 without layers in the config: [512, 4] (4110 parameters)"
else bad "layers[1]=4 without layers (exit $rc)" "$(grep -o 'model mlp ([0-9]* parameters)' <<<"$out")" "$(tail -2 <<<"$out")"; fi
# A list inside a list option is refused, naming the item (it read as an empty item, dropped).
out="$(cd "$t" && "$bin" run proj/c.yaml run.name=nested 'model.params.layers=[8, [2]]' 2>&1)"; rc=$?
if [ "$rc" = 1 ] && grep -q "model.params.layers\[1\]: expected a value, got a list" <<<"$out"; then ok "layers=[8, [2]] refused: $(tail -1 <<<"$out")"
else bad "a nested list in an int list (exit $rc)" "$(tail -2 <<<"$out")"; fi
finish
