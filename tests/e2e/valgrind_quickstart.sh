#!/usr/bin/env bash
# The quickstart under valgrind's memcheck: no memory errors and no definitely-lost bytes
# (24 steps, one thread, one validation pass and the final checkpoint, about a minute).
# Skipped (77) without valgrind and in sanitizer builds (valgrind and ASan do not mix).
# LIBDIR, when given, holds a libtrainer built without -march (core/CMakeLists.txt says why);
# the binary and the plugins are the normal ones.
# usage: valgrind_quickstart.sh TRAINER_BIN QUICKSTART_YAML VALGRIND SANITIZE [LIBDIR]
set -u
bin="$1"; cfg="$2"; vg="$3"; sanitize="$4"; libdir="${5:-}"
if [ -z "$vg" ] || ! [ -x "$vg" ]; then echo "SKIP: valgrind is not installed (tools/dev deps installs it)"; exit 77; fi
case "$sanitize" in ON|on|1|TRUE|true) echo "SKIP: a sanitizer build (valgrind and ASan do not mix)"; exit 77 ;; esac
if ldd "$bin" 2>/dev/null | grep -q libasan; then echo "SKIP: $bin is linked with ASan"; exit 77; fi
t="$(mktemp -d /tmp/trainer-vg-XXXXXX)"
trap 'rm -rf "$t"' EXIT
. "$(dirname "$0")/lib.sh"
if [ -n "$libdir" ]; then export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi

start=$(date +%s)
timeout 600 "$vg" --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    --log-file="$t/vg.log" "$bin" run "$cfg" "run.output_dir=$t/runs" trainer.max_steps=24 trainer.threads=1 \
    >"$t/out.log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
# valgrind's summary, for the log (tools/reliability reads it from ctest -V).
grep -E "Command:|HEAP SUMMARY|in use at exit|total heap usage|LEAK SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|suppressed:|All heap blocks|ERROR SUMMARY" "$t/vg.log"
errors="$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$t/vg.log" | tail -1)"
lost="$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$t/vg.log" | tail -1)"
if [ "$rc" = 0 ] && grep -q "done: 24 steps" "$t/out.log" && [ "$errors" = 0 ] && { [ -z "$lost" ] || [ "$lost" = 0 ]; }; then
    ok "valgrind memcheck of the quickstart (24 steps, ${secs}s): 0 errors, 0 bytes definitely lost"
else
    bad "valgrind memcheck (exit $rc, ${secs}s, errors '${errors:-?}', definitely lost '${lost:-?}')" \
        "$(grep -E 'Invalid|uninitialised|definitely|unhandled instruction|Process terminating' "$t/vg.log" | head -8)" \
        "$(tail -3 "$t/out.log")"
    sed -n '1,80p' "$t/vg.log"
fi
[ -d "$t/runs/quickstart/0/checkpoints/step-00000024" ] && ok "the final checkpoint was written under valgrind" ||
    bad "no checkpoint step-00000024" "$(ls -R "$t/runs" 2>&1 | head -5)"
finish
