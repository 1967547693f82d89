# Shared by the e2e scripts that check several things: `ok NAME` and `bad NAME [DETAIL...]`
# count and print each check; `finish` prints the "N passed, N failed" line and fails if any
# check did. Source it: . "$(dirname "$0")/lib.sh"
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; }
# `record KIND NAME OUTCOME SECONDS MESSAGE`: with RELIABILITY_LOG set, appends a row for the
# reliability report (tools/reliability): what was injected or fed, what happened, the message.
record() {
    [ -n "${RELIABILITY_LOG:-}" ] || return 0
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(printf '%s' "$5" | tr '\t\n' '  ')" >>"$RELIABILITY_LOG"
}
