#!/usr/bin/env bash
# The csv and text datasets with a tokenizer, from `trainer run`:
# - bad input is refused with one message naming the file (line, byte, column) and a non-zero
#   exit, never a crash: invalid UTF-8, a missing text column or JSON key (the ones that exist
#   named), a label outside `classes`, a tokenizer that cannot load, a malformed JSON line, an
#   unclosed quote, a text too long with truncation false, mode lm;
# - an empty text is accepted (the special tokens alone, as Hugging Face gives);
# - the transformer classifier trains on the reviews CSV (tests/data/tokdata) to well above
#   chance, with padding longest and batches of one (no padding position reaches the model).
# usage: tokenized_data.sh TRAINER_BIN
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
src="$(cd "$(dirname "$0")/../data/tokdata" && pwd)"
. "$(dirname "$0")/lib.sh"
t="$(mktemp -d /tmp/trainer-tokdata-XXXXXX)"
trap 'rm -rf "$t"' EXIT
cd "$t" || exit 1
cp "$src"/* .

cfg() { # cfg FILE DATA_NAME PARAMS [BATCH]
    cat >"$1" <<YAML
run: {name: r, seed: 1, output_dir: runs}
model: {name: transformer, params: {mode: classify, d_model: 32, n_head: 2, n_layer: 1, dropout: 0.0}}
data: {name: $2, params: {$3}, batch_size: ${4:-1}, val_fraction: 0.2}
trainer: {max_epochs: 1, progress: lines, threads: 1, log_every: 1000}
optimizer: {name: adamw, lr: 0.003}
YAML
}
expect() { # expect NAME REGEX CMD... : non-zero exit (not a signal) and the message
    local name="$1" re="$2"; shift 2
    local out rc
    out="$("$@" 2>&1)"; rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 126 ] || ! grep -Eq -- "$re" <<<"$out" || grep -q "Sanitizer\|runtime error" <<<"$out"; then
        bad "$name (exit $rc): wanted /$re/" "$(tail -3 <<<"$out")"
    else
        ok "$name: $(grep -E -- "$re" <<<"$out" | head -1)"
    fi
}
tok="tokenizer: tokenizer.json, max_length: 24"

# ---- bad input ----
printf 'text,label\nThe movie was great,positive\ncaf\xe9 was fine,positive\nbad,negative\n' >latin1.csv
cfg c.yaml csv "path: latin1.csv, $tok"
expect invalid_utf8 "latin1.csv:3: invalid UTF-8 at byte 3 of the line \(byte 43 of the file\)" "$bin" run c.yaml
cfg c.yaml csv "path: small.csv, $tok, text_column: review"
expect missing_column "small.csv: no column 'review' \(text_column; the columns: 'id', 'text', 'label'\)" "$bin" run c.yaml
cfg c.yaml csv "path: small.jsonl, $tok, label_column: sentiment"
expect missing_key "small.jsonl:1: no key 'sentiment' \(the label column; the keys: 'text', 'label', 'id'\)" "$bin" run c.yaml
cfg c.yaml csv "path: small.csv, $tok, classes: '[positive, neutral]'"
expect label_outside_classes "small.csv:4: column 'label': label 'negative' is not one of the 2 classes \(data.params classes\)" "$bin" run c.yaml
printf 'text,label\nfine,0\nbad,1\nodd,2000000000\n' >huge_label.csv
cfg c.yaml csv "path: huge_label.csv, $tok"
expect huge_inferred_class "huge_label.csv:4: label 2000000000 would make 2000000001 classes \(more than 16777216\)" "$bin" run c.yaml
cfg c.yaml csv "path: small.csv, tokenizer: nope/tokenizer.json"
expect tokenizer_missing "csv: tokenizer '.*/nope/tokenizer.json' \(data.params.tokenizer\): .*nope" "$bin" run c.yaml
printf '{"model": {"type": "WordPiece", "vocab": {"a": 0' >broken.json
cfg c.yaml text "path: small.jsonl, mode: classify, tokenizer: broken.json"
expect tokenizer_malformed "text: tokenizer '.*/broken.json' \(data.params.tokenizer\): .*broken.json.*malformed JSON" "$bin" run c.yaml
printf '{"text": "fine", "label": "positive"}\n{"text": "oops", "label": }\n' >bad.jsonl
cfg c.yaml csv "path: bad.jsonl, $tok"
expect malformed_json_line "bad.jsonl:2:[0-9]+: malformed JSON" "$bin" run c.yaml
printf '["a list", "not an object"]\n' >list.jsonl
cfg c.yaml csv "path: list.jsonl, $tok"
expect json_not_object "list.jsonl:1: expected a JSON object, got an array" "$bin" run c.yaml
printf 'text,label\n"never closed,positive\nfine,negative\n' >open.csv
cfg c.yaml csv "path: open.csv, $tok"
expect unclosed_quote "open.csv:2: column 1: the quoted field opened on this line is never closed" "$bin" run c.yaml
printf 'text,label\n"quoted"x,positive\n' >after.csv
cfg c.yaml csv "path: after.csv, $tok"
expect text_after_quote "after.csv:2: column 1: 'x' after the closing quote" "$bin" run c.yaml
printf 'text,label\na,b,c\n' >cells.csv
cfg c.yaml csv "path: cells.csv, $tok"
expect wrong_field_count "cells.csv:2: 3 fields, expected 2 like the header" "$bin" run c.yaml
cfg c.yaml csv "path: small.csv, tokenizer: tokenizer.json, max_length: 6, truncation: false"
expect too_long_untruncated "small.csv:2: column 'text': 10 tokens, longer than max_length 6 \(truncation is false" "$bin" run c.yaml
cfg c.yaml text "path: lines.txt, tokenizer: tokenizer.json"
expect mode_lm "text: tokenizer: mode lm reads bytes" "$bin" run c.yaml
printf 'positive\tfine\nnegative\n' >notab.txt
cfg c.yaml text "path: notab.txt, mode: classify, $tok"
expect lines_without_tab "notab.txt:2: expected 'label<TAB>text', found 0 TAB" "$bin" run c.yaml
cfg c.yaml csv "path: small.csv, tokenizer: tokenizer.json, max_length: 2"
expect max_length_too_small "max_length 2 leaves no room for a token beside the 2 special tokens" "$bin" run c.yaml
cfg c.yaml csv "path: small.csv, $tok, delimiter: ab"
expect bad_delimiter "csv: delimiter: one character or 'tab', got 'ab'" "$bin" run c.yaml

# ---- an empty text trains (small.csv row 4 has one) ----
cfg c.yaml csv "path: small.csv, $tok"
out="$("$bin" run c.yaml data.val_fraction=0 2>&1)" && ok "an empty text is accepted" || bad "empty text" "$(tail -3 <<<"$out")"

# ---- the reviews classifier, batches of one: padding never reaches the model ----
cfg c.yaml csv "path: reviews.csv, $tok"
out="$("$bin" run c.yaml run.name=reviews 2>&1)"
acc="$(sed -n 's/.*final validation accuracy: \([0-9.]*\)%.*/\1/p' <<<"$out")"
if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 80) }'; then ok "reviews: validation accuracy $acc% (chance ~50%)"
else bad "reviews classifier: accuracy '$acc'" "$(tail -3 <<<"$out")"; fi
out="$("$bin" predict c.yaml --checkpoint runs/reviews/0 --output p.csv 2>&1)"
[ -s p.csv ] && grep -q "positive\|negative" p.csv && ok "predict writes class names" || bad "predict" "$(tail -3 <<<"$out")" "$(head -3 p.csv 2>/dev/null)"
# the same through TSV and JSON Lines, and the text plugin
cfg c.yaml text "path: small.jsonl, mode: classify, $tok"
out="$("$bin" run c.yaml run.name=tj data.val_fraction=0 2>&1)" && ok "text plugin trains on JSON Lines" || bad "text jsonl" "$(tail -3 <<<"$out")"
finish
