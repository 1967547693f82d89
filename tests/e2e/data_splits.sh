#!/usr/bin/env bash
# Validation splits and classes give the numbers asked for, or a clear error:
# - a validation split that is configured but cannot load (missing file, no label column)
#   stops eval, predict and run naming the file, never scoring the train split instead;
#   with no validation split at all, eval without --split refuses and says --split train;
# - data.val_params inherits data.params and a file given there is scored whole (csv; text in
#   lm and classify modes), with the same numbers as scoring that file as the train split;
# - csv `classes` (a count, or names that predict writes, in its rows and its prob_<name>
#   columns, quoted per RFC 4180 when they hold a comma or a quote), labels outside them refused with
#   file:line; the checkpoint keeps the classes: a file lacking the top class scores, and a
#   config whose classes differ is refused naming both.
# - a dataset plugin built for ABI 0.6 that errs for "no validation split" still trains
#   without one, unless data.val_params asks for one.
# usage: data_splits.sh TRAINER_BIN [TEST_PLUGIN_DIR]
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
plugdir="${2:+$(cd "$2" && pwd)}"
. "$(dirname "$0")/lib.sh"
t="$(mktemp -d /tmp/trainer-splits-XXXXXX)"
trap 'rm -rf "$t"' EXIT
cd "$t" || exit 1

# Two features; the label is the first feature's integer part (3 classes).
rows() { # N SEED CLASSES [NAMES...]
    awk -v n="$1" -v seed="$2" -v k="$3" -v names="${4:-}" 'BEGIN {
        srand(seed); split(names, nm, " "); print "a,b,label"
        for (i = 0; i < n; i++) { y = i % k; printf "%.4f,%.4f,%s\n", y + rand(), rand(), names != "" ? nm[y + 1] : y } }'
}
rows 60 1 3 >train.csv
rows 10 2 2 >two.csv              # classes 0 and 1 only: lacks the top class
printf 'a,b,c\n0.5,0.5,1\n' >nolabel.csv
cat >c.yaml <<'EOF'
run: {name: c, seed: 3, output_dir: runs}
model: {name: mlp, params: {layers: [8]}}
data: {name: csv, params: {path: train.csv, normalize: none}, batch_size: 8, val_fraction: 0.25, shuffle: false}
trainer: {max_epochs: 3, progress: lines, threads: 1}
optimizer: {lr: 0.05}
EOF
out="$("$bin" run c.yaml 2>&1)" || bad "csv run" "$out"
ck=runs/c/0

# ---- 1. a configured validation split that cannot load is an error ----
expect_fail() { # NAME PATTERN CMD...
    local name="$1" pat="$2" o rc
    shift 2
    o="$("$@" 2>&1)"; rc=$?
    if [ "$rc" != 0 ] && [ "$rc" -lt 126 ] && grep -q -- "$pat" <<<"$o" && ! grep -q "on the train split\|Sanitizer\|runtime error" <<<"$o"; then ok "$name"
    else bad "$name" "exit $rc" "$(tail -3 <<<"$o")"; fi
}
expect_fail "eval: missing val_params file named" "missing.csv: cannot open" "$bin" eval c.yaml --checkpoint $ck data.val_params.path=missing.csv
expect_fail "eval: val file without the label column" "nolabel.csv: column 3 is 'c'" "$bin" eval c.yaml --checkpoint $ck data.val_params.path=nolabel.csv
expect_fail "predict: missing val_params file named" "missing.csv: cannot open" "$bin" predict c.yaml --checkpoint $ck --output p.csv data.val_params.path=missing.csv
[ ! -e p.csv ] && ok "predict wrote nothing" || bad "predict wrote p.csv" "$(head -3 p.csv)"
expect_fail "run: missing val_params file stops before training" "missing.csv: cannot open" "$bin" run c.yaml run.name=r2 data.val_params.path=missing.csv
[ ! -d runs/r2/0/checkpoints ] || [ -z "$(ls runs/r2/0/checkpoints)" ] && ok "run trained nothing" || bad "run r2 saved checkpoints"
expect_fail "eval: no validation split asks for --split train" "pass --split train" "$bin" eval c.yaml --checkpoint $ck data.val_fraction=0
o="$("$bin" eval c.yaml --checkpoint $ck data.val_fraction=0 --split train 2>&1)"
grep -q "on the train split, 60 samples" <<<"$o" && ok "eval --split train scores 60 rows" || bad "eval --split train" "$o"
o="$("$bin" run c.yaml run.name=nv data.val_fraction=0 trainer.max_epochs=1 2>&1)" && ok "run without a validation split" ||
    bad "run val_fraction 0" "$(tail -3 <<<"$o")"

# ---- 2. a file given in val_params is scored whole, as if it were the train split ----
# loss and accuracy of a line "... N samples: loss L  accuracy A%"
score() { sed -n 's/.* \([0-9]*\) samples: loss \([0-9.]*\).*accuracy \([0-9.]*\)%.*/\1 \2 \3/p' <<<"$1"; }
v="$(score "$("$bin" eval c.yaml --checkpoint $ck data.val_params.path=two.csv 2>&1)")"
w="$(score "$("$bin" eval c.yaml --checkpoint $ck --split train data.params.path=two.csv data.val_fraction=0 2>&1)")"
if [ -n "$v" ] && [ "${v%% *}" = 10 ] && [ "$v" = "$w" ]; then ok "csv val_params.path scores all 10 rows ($v)"
else bad "csv val_params.path" "val_params: '$v'" "as train split: '$w'"; fi

# the run's config.yaml writes what val_params inherited, and reads back the same
o="$("$bin" run c.yaml run.name=vp data.val_params.path=two.csv trainer.max_epochs=1 2>&1)"
if sed -n '/^  val_params:/,/^  [a-z]/p' runs/vp/0/config.yaml 2>/dev/null | grep -q "normalize: none" &&
    o2="$("$bin" eval runs/vp/0/config.yaml --checkpoint runs/vp/0 "data.params.path=$t/train.csv" "data.val_params.path=$t/two.csv" 2>&1)" &&
    grep -q "validation split, 10 samples" <<<"$o2"; then ok "config.yaml's val_params holds the inherited keys"
else bad "resolved val_params" "$o" "${o2:-}" "$(cat runs/vp/0/config.yaml 2>/dev/null | head -20)"; fi

# text, lm: val_params inherits seq_len; every sample of the file
head -c 3000 /dev/urandom | base64 -w 60 >train.txt
head -c 600 /dev/urandom | base64 -w 60 >other.txt
cat >lm.yaml <<'EOF'
run: {name: lm, seed: 1, output_dir: runs}
model: {name: transformer, params: {mode: lm, d_model: 16, n_head: 2, n_layer: 1, max_seq: 16}}
data: {name: text, params: {path: train.txt, seq_len: 16}, batch_size: 8}
trainer: {max_steps: 4, progress: lines, threads: 1}
EOF
if o="$("$bin" run lm.yaml 2>&1)"; then
    n=$(( ($(wc -c <other.txt) - 17) / 16 + 1 ))
    v="$(sed -n 's/.* \([0-9]*\) samples: loss \([0-9.]*\).*/\1 \2/p' <<<"$("$bin" eval lm.yaml --checkpoint runs/lm/0 data.val_params.path=other.txt 2>&1)")"
    w="$(sed -n 's/.* \([0-9]*\) samples: loss \([0-9.]*\).*/\1 \2/p' <<<"$("$bin" eval lm.yaml --checkpoint runs/lm/0 --split train data.params.path=other.txt data.val_fraction=0 2>&1)")"
    [ "${v%% *}" = "$n" ] && [ "$v" = "$w" ] && ok "text lm val_params.path scores all $n samples ($v)" || bad "text lm val_params" "'$v' vs '$w', expected $n samples"
else bad "text lm run" "$(tail -3 <<<"$o")"; fi

# text, classify: ids from the train file's labels, so a file lacking a label scores
awk 'BEGIN { srand(4); for (i = 0; i < 90; i++) { k = i % 3; printf "%s\t%s%s\n", substr("abc", k + 1, 1), substr("xyz", k + 1, 1), rand() } }' >train.tsv
awk 'BEGIN { srand(5); for (i = 0; i < 12; i++) { k = 1 + i % 2; printf "%s\t%s%s\n", substr("abc", k + 1, 1), substr("xyz", k + 1, 1), rand() } }' >bc.tsv
cat >tc.yaml <<'EOF'
run: {name: tc, seed: 1, output_dir: runs}
model: {name: transformer, params: {mode: classify, d_model: 16, n_head: 2, n_layer: 1, max_seq: 8}}
data: {name: text, params: {path: train.tsv, mode: classify, seq_len: 8}, batch_size: 16}
trainer: {max_steps: 12, progress: lines, threads: 1}
optimizer: {lr: 0.01}
EOF
if o="$("$bin" run tc.yaml 2>&1)"; then
    o="$("$bin" predict tc.yaml --checkpoint runs/tc/0 --output tp.csv data.val_params.path=bc.tsv 2>&1)"
    v="$(score "$o")"
    # the labels written are the names b and c; accuracy recomputed from the rows
    acc="$(awk -F, 'NR > 1 { n++; h += $2 == $3; if ($2 != "b" && $2 != "c") bad = 1 } END { if (!bad && n) printf "%d %.2f", n, 100 * h / n }' tp.csv)"
    [ "${v%% *}" = 12 ] && [ "$acc" = "12 ${v##* }" ] && ok "text classify val_params.path scores all 12 lines by name ($v)" ||
        bad "text classify val_params" "eval '$v', rows '$acc'" "$(head -3 tp.csv)"
    printf 'b\tx1\n\nz\ty2\n' >bz.tsv # a blank line: the unknown label is on the file's line 3, its row 2
    expect_fail "text: a label outside the classes is refused at its file line" "bz.tsv:3: label 'z' is not one of the 3 classes" \
        "$bin" eval tc.yaml --checkpoint runs/tc/0 data.val_params.path=bz.tsv
else bad "text classify run" "$(tail -3 <<<"$o")"; fi

# ---- 3. classes ----
{ rows 30 6 3; echo "0.5,0.5,7"; } >stray.csv
expect_fail "classes: 3 refuses a stray label 7 at its line" "stray.csv:32: column 'label': label 7 is not a class" \
    "$bin" run c.yaml run.name=s data.params.path=stray.csv data.params.classes=3
rows 60 7 3 "cat dog bird" >named.csv
rows 9 8 2 "cat dog" >named2.csv
cat >n.yaml <<'EOF'
run: {name: n, seed: 3, output_dir: runs}
model: {name: mlp, params: {layers: [8]}}
data: {name: csv, params: {path: named.csv, classes: [cat, dog, bird]}, batch_size: 8}
trainer: {max_epochs: 2, progress: lines, threads: 1}
EOF
if o="$("$bin" run n.yaml 2>&1)"; then
    grep -q '"names": \[' runs/n/0/checkpoints/*/state.json && ok "state.json keeps the class names" || bad "state.json classes" "$(cat runs/n/0/checkpoints/*/state.json)"
    o="$("$bin" predict n.yaml --checkpoint runs/n/0 --output np.csv data.val_params.path=named2.csv 2>&1)"
    if awk -F, 'NR > 1 { n++; if ($2 !~ /^(cat|dog)$/ || $3 !~ /^(cat|dog|bird)$/) bad = 1 } END { exit bad || n != 9 }' np.csv; then
        ok "predict names the classes, 9 rows"
    else bad "predict with names" "$o" "$(head -3 np.csv)"; fi
    h="$(head -1 np.csv)"
    [ "$h" = "index,label,prediction,confidence,prob_cat,prob_dog,prob_bird" ] &&
        ok "predict's header: a probability column per class, by name ($h)" || bad "predict's header with names" "$h"
    expect_fail "a checkpoint whose classes differ is refused naming both" "trained on 3 classes \[cat, dog, bird\].*\[dog, cat, bird\]" \
        "$bin" eval n.yaml --checkpoint runs/n/0 "data.params.classes=[dog, cat, bird]"
    expect_fail "a label not among the names is refused at its line" "named.csv:2: column 'label': 'cat' is not one of the 2 classes" \
        "$bin" eval n.yaml --checkpoint runs/n/0 "data.params.classes=[dog, bird]"
else bad "named run" "$(tail -3 <<<"$o")"; fi
# a list of names longer than a kilobyte (80 names), whole
long="[$(awk 'BEGIN { for (i = 0; i < 80; i++) printf "%sclass_number_%02d", i ? ", " : "", i }')]"
awk 'BEGIN { srand(9); print "a,b,label"; for (i = 0; i < 120; i++) printf "%.4f,%.4f,class_number_%02d\n", rand(), rand(), i % 80 }' >long.csv
o="$("$bin" run c.yaml run.name=long data.params.path=long.csv "data.params.classes=$long" trainer.max_epochs=1 2>&1)"
if grep -q '"count": 80' runs/long/0/checkpoints/*/state.json 2>/dev/null && grep -q '"class_number_79"' runs/long/0/checkpoints/*/state.json; then
    ok "a classes list of ${#long} characters is read whole (80 names in state.json)"
else bad "a long classes list" "$(tail -2 <<<"$o")"; fi
expect_fail "a classes count other than the checkpoint's is refused naming both" \
    "was trained on 3 classes, integer labels 0..2, the config's data has 4 classes" "$bin" eval c.yaml --checkpoint $ck data.params.classes=4
# inferred classes: the checkpoint's 3 outputs score a file whose labels stop at 1
o="$("$bin" predict c.yaml --checkpoint $ck --split train --output q.csv data.params.path=two.csv data.val_fraction=0 2>&1)"
[ "$(($(wc -l <q.csv) - 1))" = 10 ] && ok "a file lacking the top class scores with the checkpoint's classes" || bad "two.csv as train" "$o"

# class names CSV must quote (a comma, a quote): quoted per RFC 4180, in the prob_ columns too
for i in 1 2 3 4; do printf 'plain\tx%s\na,b\ty%s\nsay "hi"\tz%s\n' $i $i $i; done >q.tsv
if o="$("$bin" run tc.yaml run.name=q data.params.path=q.tsv data.val_fraction=0 trainer.max_steps=2 2>&1)" &&
   o="$("$bin" predict tc.yaml --checkpoint runs/q/0 --split train --output qp.csv data.params.path=q.tsv data.val_fraction=0 2>&1)"; then
    h="$(head -1 qp.csv)"; r="$(sed -n 3p qp.csv)"
    [ "$h" = 'index,label,prediction,confidence,"prob_a,b",prob_plain,"prob_say ""hi"""' ] && [ "${r#1,\"a,b\",}" != "$r" ] &&
        ok "class names with a comma or a quote are quoted: $h / $r" || bad "quoted class names" "$h" "$r"
else bad "quoted class names: run or predict" "$(tail -3 <<<"$o")"; fi

# ---- a dataset built for ABI 0.6 ----
if [ -n "$plugdir" ] && [ -e "$plugdir/old_dataset" ]; then
    cat >old.yaml <<EOF
run: {name: old, output_dir: runs}
model: {name: mlp, params: {layers: [4]}}
data: {name: old_dataset, val_fraction: 0, batch_size: 8}
trainer: {max_epochs: 1, progress: lines, threads: 1}
plugins: [$plugdir/old_dataset]
EOF
    o="$("$bin" run old.yaml 2>&1)" && grep -q "no validation split: .*old_dataset: no validation rows" <<<"$o" &&
        ok "an ABI 0.6 dataset's error for none: no validation split" || bad "old dataset without val_params" "$(tail -3 <<<"$o")"
    expect_fail "an ABI 0.6 dataset's error with data.val_params stops" "old_dataset: no validation rows" \
        "$bin" run old.yaml run.name=old2 data.val_params.samples=4
elif [ -n "$plugdir" ]; then
    bad "the ABI 0.6 dataset fixture is missing" "$plugdir/old_dataset (tests/CMakeLists.txt builds it)"
fi
finish
