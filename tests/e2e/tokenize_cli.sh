#!/usr/bin/env bash
# `trainer tokenize`: ids, --tokens, --no-special, --pair, --decode, --max-length, padding from
# the file, empty and CRLF lines, a model folder, and the exit status and message of bad input.
# The expected ids were checked against Hugging Face tokenizers 0.23.3 on the same file.
# usage: tokenize_cli.sh TRAINER_BIN
set -u
. "$(dirname "$0")/lib.sh"
bin="$1"
dir="$(mktemp -d /tmp/trainer-tokenize-XXXXXX)"
trap 'rm -rf "$dir"' EXIT
cat >"$dir/tokenizer.json" <<'JSON'
{"version": "1.0", "truncation": null,
 "padding": {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
 "added_tokens": [
  {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
 "pre_tokenizer": {"type": "BertPreTokenizer"},
 "post_processor": {"type": "TemplateProcessing",
  "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
  "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
           {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
  "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
 "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
  "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, ",": 5, "world": 6, "!": 7, "un": 8, "##aff": 9,
            "##able": 10, "cafe": 11, "'": 12, "s": 13}}}
JSON
tok="$dir/tokenizer.json"
# check NAME WANT_OUTPUT INPUT ARGS...: stdout must equal WANT_OUTPUT and the status be 0.
check() {
    local name="$1" want="$2" input="$3"; shift 3
    local out rc
    out="$(printf "$input" | "$bin" tokenize "$@" 2>&1)"; rc=$?
    if [ "$rc" = 0 ] && [ "$out" = "$want" ]; then ok "$name"; else bad "$name" "rc=$rc" "got:  $out" "want: $want"; fi
}
# refuse NAME REGEX INPUT ARGS...: the status must be 1 and the message match REGEX.
refuse() {
    local name="$1" re="$2" input="$3"; shift 3
    local out rc
    out="$(printf "$input" | "$bin" tokenize "$@" 2>&1)"; rc=$?
    if [ "$rc" = 1 ] && grep -Eq -- "$re" <<<"$out"; then ok "$name"; else bad "$name" "rc=$rc" "got: $out"; fi
}
check ids "2 4 5 6 7 3 0 0" 'Hello, World!\n' "$tok"
check no_padding "2 4 5 6 7 3" 'Hello, World!\n' "$tok" --no-padding
check folder "2 4 5 6 7 3" 'Hello, World!\n' "$dir" --no-padding
check tokens "[CLS] un ##aff ##able cafe [SEP] [PAD] [PAD]" 'UNAFFABLE Caf\xc3\xa9\n' "$tok" --tokens
check no_special "8 9 10 1" 'unaffable zzz\n' "$tok" --no-special --no-padding
check empty_and_crlf $'2 3\n2 4 3' '\nhello\r\n' "$tok" --no-padding
check pair "2 4 3 6 6 3" 'hello\tworld  world\n' "$tok" --pair --no-padding
check type_ids "0 0 0 1 1 1 0 0" 'hello\tworld  world\n' "$tok" --pair --type-ids
check mask "1 1 1 1 1 1 0 0" 'hello\tworld  world\n' "$tok" --pair --mask
check max_length "2 4 4 3" 'hello hello hello\n' "$tok" --max-length 4 --no-padding
check only_second "2 4 4 3 6 3" 'hello hello\tworld world world\n' "$tok" --pair --max-length 6 --truncation only_second --no-padding
check decode "hello, world! unaffable ' s" '2 4 5 6 7 8 9 10 12 13 3 0 0\n' "$tok" --decode
check special_in_text "2 4 3 6 3" 'hello [SEP] world\n' "$tok" --no-padding
refuse bad_utf8 ':2: invalid UTF-8 at byte 3 of the line' 'ok\nabc\xff\n' "$tok"
refuse no_tab 'expects TEXT<TAB>PAIR' 'hello\n' "$tok" --pair
refuse bad_ids 'expected ids separated by spaces' '2 x\n' "$tok" --decode
refuse missing 'cannot open' '' "$dir/nope.json"
printf '{"model": {"type": "WordPiece", "vocab": {"a": 0' >"$dir/truncated.json"
refuse truncated 'truncated.json:1:[0-9]+: malformed JSON' '' "$dir/truncated.json"
sed 's/"BertPreTokenizer"/"UnicodeScripts"/' "$tok" >"$dir/meta.json"
refuse unsupported "pre_tokenizer: pre-tokenizer 'UnicodeScripts' is not supported \\(supported: BertPreTokenizer" '' "$dir/meta.json"
refuse too_short 'too short' 'hello hello\tworld\n' "$tok" --pair --max-length 4 --truncation only_second
out="$("$bin" tokenize 2>&1)"; rc=$?
if [ "$rc" = 2 ] && grep -q 'usage: trainer tokenize' <<<"$out"; then ok usage; else bad usage "rc=$rc" "$out"; fi
finish
