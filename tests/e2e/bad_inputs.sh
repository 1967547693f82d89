#!/usr/bin/env bash
# A table of bad inputs to `trainer run` / `eval` / `predict` / `plugins`: configs, command-line overrides,
# data files, plugins and checkpoints. Each must exit non-zero (never crash: no signal, no
# sanitizer report) with its own message naming the thing and where it came from.
# usage: bad_inputs.sh TRAINER_BIN TEST_PLUGIN_DIR   (needs no data from shared/)
set -u
bin="$1"; plugdir="$2"
t="$(mktemp -d /tmp/trainer-bad-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
base() { # a small valid config into $1; $2 replaces the data section's name and params
    local synth="  name: synthetic
  params: {samples: 256, val_samples: 64, features: 8, classes: 4}"
    local data="${2:-$synth}"
    cat >"$1" <<YAML
run: {name: bad, output_dir: $t/runs}
model: {name: mlp, params: {layers: [16]}}
data:
$data
  batch_size: 32
trainer: {max_epochs: 1, log_every: 1000}
YAML
}
expect() { # expect NAME REGEX CMD... : non-zero exit (not a signal) and the message
    local name="$1" re="$2"; shift 2
    local out rc
    out="$("$@" 2>&1)"; rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 126 ] || ! grep -Eq -- "$re" <<<"$out" || grep -q "Sanitizer\|runtime error" <<<"$out"; then
        echo "FAIL $name (exit $rc): wanted /$re/, got:"; echo "$out" | tail -5; fail=$((fail + 1))
    else
        echo "ok   $name: $(grep -E -- "$re" <<<"$out" | head -1)"; pass=$((pass + 1))
        record bad_input "$name" "exit $rc" - "$(grep -E -- "$re" <<<"$out" | head -1)"
    fi
}
c="$t/c.yaml"

base "$c"; expect missing_config "nope.yaml: " "$bin" run "$t/nope.yaml"
printf 'model: [unclosed\n' >"$c"; expect yaml_syntax "c.yaml:2:1: " "$bin" run "$c"
base "$c"; echo "trainer: {max_epoch: 3}" >>"$c"
expect duplicate_section "c.yaml:8:1: trainer: duplicate key" "$bin" run "$c"
base "$c"; sed -i 's/max_epochs: 1/max_epoch: 1/' "$c"
expect unknown_key_suggestion "trainer.max_epoch: unknown key \(did you mean 'max_epochs'\?\)" "$bin" run "$c"
base "$c"; sed -i 's/max_epochs: 1/max_epochs: abc/' "$c"
expect wrong_type "c.yaml:7:23: trainer.max_epochs: expected an integer, got 'abc'" "$bin" run "$c"
base "$c"; sed -i 's/batch_size: 32/batch_size: 0/' "$c"
expect out_of_range "data.batch_size: must be between 1 and" "$bin" run "$c"
base "$c"; expect max_steps_zero "command line:1:19: trainer.max_steps: 0 would train nothing; use -1 for no limit" "$bin" run "$c" trainer.max_steps=0
base "$c"; sed -i 's/^model: .*/model: {params: {layers: [16]}}/' "$c"
expect missing_required "model.name: required key is missing" "$bin" run "$c"
base "$c"; sed -i 's/name: mlp/name: mlpp/' "$c"
expect unknown_plugin "model.name: no model plugin named 'mlpp' \(available: cnn, hf_encoder, mlp, transformer\)" "$bin" run "$c"
base "$c"; sed -i 's/name: mlp/name: synthetic/' "$c"
expect wrong_kind_plugin "'synthetic' is a dataset plugin" "$bin" run "$c"
base "$c"; sed -i 's/layers: \[16\]/layerz: [16]/' "$c"
expect plugin_option_suggestion "model.params.layerz: unknown option \(did you mean 'layers'\?\)" "$bin" run "$c"
base "$c"; sed -i 's/layers: \[16\]/layers: [16, 0]/' "$c"
expect plugin_option_range "model.params.layers: must be between 1 and [0-9]+, got 0" "$bin" run "$c"
base "$c"; expect bad_override "command line:1:14: optimizer.lr: expected a number, got 'fast'" "$bin" run "$c" optimizer.lr=fast
base "$c"; expect strategy_probe "strategy ddp \(.*\) cannot run here: strategy.backend: no comm plugin named 'gloo' \(available: .*shm\)" "$bin" run "$c" trainer.devices=2 strategy.backend=gloo
base "$c"; expect malformed_override "trainer.max_epochs" "$bin" run "$c" trainer.max_epochs
# data files
head -c 50000 /dev/urandom | gzip -c >"$t/whole.gz"
head -c 5000 "$t/whole.gz" >"$t/trunc.gz"   # a gzip stream cut short; images are read first
base "$c" "  name: idx
  params: {images: $t/trunc.gz, labels: $t/labels.idx}"
expect truncated_idx "trunc.gz: .*(truncated|corrupt)" "$bin" run "$c"
printf 'a,b,label\n1,2,0\n3,x,1\n' >"$t/bad.csv"
base "$c" "  name: csv
  params: {path: $t/bad.csv}"
expect csv_bad_cell "bad.csv:3: column 'b': expected a number, got 'x'" "$bin" run "$c"
base "$c" "  name: text
  params: {path: $t/none.txt}"
expect missing_text_file "none.txt" "$bin" run "$c"
printf 'a,b,label\n1,2,0\n3,4,1\n5,6,3\n' >"$t/ok.csv"
base "$c" "  name: csv
  params: {path: $t/ok.csv}"
expect missing_val_file "data \(csv, validation split\): .*none.csv: cannot open" "$bin" run "$c" data.val_params.path=$t/none.csv
expect csv_label_not_a_class "ok.csv:4: column 'label': label 3 is not a class: classes is 2" "$bin" run "$c" data.params.classes=2
expect csv_unknown_class_name "ok.csv:2: column 'label': '0' is not one of the 2 classes \(\[cat, dog\]\)" \
    "$bin" run "$c" "data.params.classes=[cat, dog]"
# plugins
expect plugin_bad_abi "built for plugin ABI 99\.[0-9]+" "$bin" plugins --check "$plugdir/bad/fake_bad_abi.so"
expect plugin_not_elf "not a shared object" "$bin" plugins --check "$c"
cp "$plugdir/good/fake_model.so" "$t/ww.so"; chmod 0666 "$t/ww.so"
expect plugin_world_writable "world-writable" "$bin" plugins --check "$t/ww.so"
# checkpoints: a good run, then corrupt its newest checkpoint and resume
base "$c"; "$bin" run "$c" >/dev/null 2>&1 || { echo "FAIL: the base config does not run"; fail=$((fail + 1)); }
ck="$(ls -d "$t"/runs/bad/0/checkpoints/step-* | tail -1)"
truncate -s 100 "$ck/model.safetensors"
expect truncated_checkpoint "model.safetensors: .*(truncated|does not fit)" "$bin" run "$c" trainer.max_epochs=2
rm -rf "$t/runs"; base "$c"; "$bin" run "$c" >/dev/null 2>&1
expect resume_changed_config "cannot resume .*the config changed.*model.params.layers\[0\] \(16 -> 8\)" \
    "$bin" run "$c" "model.params.layers=[8]" trainer.max_epochs=2
expect eval_other_model "fc1.weight' has shape \(16, 8\) in the checkpoint, the model has \(8, 8\)" \
    "$bin" eval "$c" --checkpoint "$t/runs/bad/0" "model.params.layers=[8]"
expect eval_no_checkpoint "$t/none: no checkpoint there" "$bin" eval "$c" --checkpoint "$t/none"
expect predict_no_output "--output FILE.csv is required" "$bin" predict "$c" --checkpoint "$t/runs/bad/0"
expect predict_unwritable "/proc/x.csv: cannot write" "$bin" predict "$c" --checkpoint "$t/runs/bad/0" --output /proc/x.csv
expect eval_bad_split "--split: expected 'val' or 'train', got 'test'" "$bin" eval "$c" --checkpoint "$t/runs/bad/0" --split test
expect unknown_strategy "trainer.strategy: no strategy plugin named 'fsdp' \(available: cpu" "$bin" run "$c" trainer.strategy=fsdp
expect override_index_out_of_range "override 'model.params.layers\[3\]=8': index 3 is out of range: model.params.layers \(.*c.yaml:2:37\) has 1 item" \
    "$bin" run "$c" "model.params.layers[3]=8"
base "$t/pl.yaml"; printf 'plugins: [my_plugins]\n' >>"$t/pl.yaml"
expect plugins_missing_folder "pl.yaml:8:11: plugins\[0\]: $t/my_plugins: no such folder" "$bin" run "$t/pl.yaml"
base "$t/pl.yaml"; printf 'plugins: [c.yaml]\n' >>"$t/pl.yaml"
expect plugins_not_a_plugin "pl.yaml:8:11: plugins\[0\]: $t/c.yaml is neither a folder nor a plugin file \(.so\)" "$bin" run "$t/pl.yaml"
printf 'plugins: [%s]\n' "$plugdir/good" >>"$c"
expect strategy_short_ops "fake_strategy.so: strategy fake_strategy: its ops table has 8 bytes, a strategy needs at least" \
    "$bin" run "$c" trainer.strategy=fake_strategy
expect strategy_options "strategy.bucket_mb: unknown option" "$bin" run "$c" strategy.bucket_mb=25
base "$t/old.yaml"; printf 'plugins: [%s]\n' "$plugdir/old" >>"$t/old.yaml"
expect on_nan_skip_old_abi "trainer.on_nan: skip: strategy old_strategy \(.*old_strategy.so\) was built for plugin ABI 0.2, which cannot leave a step out" \
    "$bin" run "$t/old.yaml" trainer.strategy=old_strategy trainer.on_nan=skip
expect on_nan_bad_value "trainer.on_nan: " "$bin" run "$t/old.yaml" trainer.on_nan=ignore
expect flush_denormals_bad_value "trainer.flush_denormals: expected true or false, got 'maybe'" \
    "$bin" run "$t/old.yaml" trainer.flush_denormals=maybe
ck="$(ls -d "$t"/runs/bad/0/checkpoints/step-* | tail -1)"
sed -i 's/"model": *"mlp"/"model": "cnn"/' "$ck/state.json"
expect checkpoint_other_model_kind "$ck holds a 'cnn' model, the config's model is 'mlp'" \
    "$bin" eval "$c" --checkpoint "$ck"
# The world: a launcher's ranks against the config, a batch too small for the ranks.
base "$c"
expect launch_devices_mismatch "launched as 2 ranks by trainer launch \(WORLD_SIZE=2\), but trainer.devices is 4" \
    "$bin" launch -n 2 "$bin" run "$c" trainer.devices=4
expect launch_one_process_strategy "strategy cpu runs in one process .*, but trainer launch started 2 ranks" \
    "$bin" launch -n 2 "$bin" run "$c" trainer.strategy=cpu
expect cpu_several_devices "trainer.strategy: cpu trains one replica in one process, but trainer.devices asks for 2" \
    "$bin" run "$c" trainer.strategy=cpu trainer.devices=2
expect batch_below_ranks "data.batch_size: the global batch \(2\) is smaller than the number of ranks \(4\)" \
    "$bin" run "$c" trainer.devices=4 data.batch_size=2
expect consolidate_no_checkpoint "$t/none: not a checkpoint .*give a checkpoint folder" \
    "$bin" checkpoint consolidate "$t/none" "$t/out.safetensors"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
