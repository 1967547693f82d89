#!/usr/bin/env bash
# The text classifier config on lines of the Debian license texts (tools/data/license_lines.sh)
# reaches a validation accuracy well above its largest class (40%).
# usage: text_classifier.sh TRAINER_BIN SOURCE_DIR MIN_ACCURACY_PERCENT
# Skips (77) when /usr/share/common-licenses lacks the texts.
set -u
bin="$1"; src="$2"; min="$3"
[ -r /usr/share/common-licenses/GPL-3 ] || { echo "SKIP: /usr/share/common-licenses not found"; exit 77; }
t="$(mktemp -d /tmp/trainer-tc-XXXXXX)"
trap 'rm -rf "$t"' EXIT
"$src/tools/data/license_lines.sh" "$t/licenses.tsv" || exit 1
"$src/tests/e2e/run_accuracy.sh" "$bin" "$src/configs/text_classifier.yaml" "$min" "$t/licenses.tsv" \
    "data.params.path=$t/licenses.tsv"
