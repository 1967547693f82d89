#!/usr/bin/env bash
# `trainer plugins`: listing, --describe, --check of good and bad plugins, exit codes.
# usage: cli_plugins.sh TRAINER_BIN TEST_PLUGIN_DIR
set -u
bin="$1"; dir="$2"; fails=0; checks=0
expect() { # expect NAME WANT_RC REGEX CMD...
    local name="$1" want="$2" re="$3"; shift 3
    local out rc
    out="$("$@" 2>&1)"; rc=$?
    checks=$((checks + 1))
    if [ "$rc" != "$want" ] || ! grep -Eq -- "$re" <<<"$out"; then
        echo "FAIL $name: rc=$rc (want $want), output:"; echo "$out"; fails=$((fails + 1))
    fi
}
export TRAINER_PLUGIN_PATH="$dir/good"
expect list 0 'model +fake_model +1\.2\.3' "$bin" plugins
expect list_strategy 0 'strategy +fake_strategy' "$bin" plugins
expect describe 0 'hidden +int +default 128 +width of the hidden layer \[1\.\.65536\]' "$bin" plugins --describe fake_model
expect describe_missing 1 "no plugin named 'nope'" "$bin" plugins --describe nope
expect check_good 0 'model fake_model 1\.2\.3' "$bin" plugins --check "$dir/good/fake_model.so"
expect check_abi 1 'built for plugin ABI 99\.[0-9]+, this trainer has ABI' "$bin" plugins --check "$dir/bad/fake_bad_abi.so"
expect check_minor 1 'built for plugin ABI [0-9]+\.99, newer than this trainer.s ABI' "$bin" plugins --check "$dir/bad/fake_new_minor.so"
for k in device comm strategy; do # the next minor, needing a function this trainer lacks
    expect check_newer_$k 1 'built for plugin ABI [0-9]+\.[0-9]+, newer than this trainer.s ABI' \
        "$bin" plugins --check "$dir/newer/fake_newer_$k.so"
done
expect check_entry 1 "no 'trainer_plugin_entry' symbol" "$bin" plugins --check "$dir/bad/fake_no_entry.so"
expect check_text 1 'not a shared object' "$bin" plugins --check "$0"
expect bad_args 2 'usage: trainer plugins' "$bin" plugins --frobnicate
TRAINER_PLUGIN_PATH="$dir/bad" expect lenient_scan 0 'plugin skipped: .*fake_bad_abi.so: built for plugin ABI 99' "$bin" plugins
echo "$((checks - fails)) passed, $fails failed"
[ "$fails" = 0 ]
