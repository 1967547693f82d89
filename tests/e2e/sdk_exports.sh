#!/usr/bin/env bash
# What libtrainer exports (docs/abi.md, "What libtrainer exports"):
# - every dynamic symbol it defines, function or data, starts with `tr_` (the core is built
#   with -fvisibility=hidden; TR_API in <trainer/export.h> marks the public API);
# - every function a public header declares TR_API is exported, and no top-level declaration
#   of a tr_ function in those headers lacks TR_API (it would link and then fail to load);
# - the plugins, shipped and test ones, and the CLI import from libtrainer only what it exports;
# - <trainer/trainer.h> includes every public header and compiles alone as C11;
# - the headers cite no file of the source tree but the installed docs (docs/NAME.md).
# usage: sdk_exports.sh LIBTRAINER INCLUDE_DIR BUILD_DIR CC
set -u
lib="$1"; inc="$2"; build="$3"; cc="$4"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
command -v nm >/dev/null || { echo "nm not found: skipped"; exit 77; }

defined="$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)"
n="$(wc -l <<<"$defined")"
foreign="$(grep -v '^tr_' <<<"$defined")"
if [ "$n" -gt 100 ] && [ -z "$foreign" ]; then ok "all $n symbols libtrainer defines start with tr_"
else bad "libtrainer exports names without tr_ ($n defined)" "$(head -20 <<<"$foreign" | tr '\n' ' ')"; fi
data="$(nm -D --defined-only "$lib" | awk 'NF == 3 && $2 !~ /^[TtWwi]$/ {print $3}')"
if [ -z "$data" ]; then ok "libtrainer exports functions only, no data"
else bad "libtrainer exports data" "$(tr '\n' ' ' <<<"$data")"; fi

declared="$(grep -ho '^TR_API[^(]*(' "$inc"/trainer/*.h | grep -o 'tr_[a-z0-9_]*($' | tr -d '(' | sort -u)"
unexported="$(comm -23 <(echo "$declared") <(echo "$defined"))"
if [ -n "$declared" ] && [ -z "$unexported" ]; then ok "all $(wc -l <<<"$declared") TR_API functions are exported"
else bad "declared TR_API but not exported" "$(tr '\n' ' ' <<<"$unexported")"; fi
unmarked="$(grep -nE '^[A-Za-z].*[ *]tr_[a-z0-9_]+\(' "$inc"/trainer/*.h | grep -vE '^[^:]*:[0-9]+:(TR_API|typedef|static|#)')"
if [ -z "$unmarked" ]; then ok "every tr_ function the public headers declare is marked TR_API"
else bad "public declarations without TR_API" "$unmarked"; fi
extra="$(comm -13 <(echo "$declared") <(echo "$defined"))"
if [ -z "$extra" ]; then ok "libtrainer exports nothing its headers do not declare"
else bad "exported but declared nowhere public" "$(tr '\n' ' ' <<<"$extra")"; fi

missing=""
# The test plugins too, but for the fixtures that call a function of a newer ABI on purpose.
for f in $(find "$build/plugins" "$build/bin" "$build/test_plugins" -maxdepth 3 -type f \( -name '*.so' -o -name trainer \) \
           -not -path '*/test_plugins/newer/*'); do
    m="$(comm -23 <(nm -D --undefined-only "$f" | awk '{print $2}' | grep '^tr_' | sort -u) <(echo "$defined"))"
    [ -z "$m" ] || missing="$missing $(basename "$f"): $(tr '\n' ' ' <<<"$m")"
done
if [ -z "$missing" ]; then ok "the plugins (shipped and test) and the CLI use only exported functions"
else bad "imports libtrainer does not export" "$missing"; fi
notincl=""
for h in "$inc"/trainer/*.h; do
    n="$(basename "$h")"
    [ "$n" = trainer.h ] || grep -qx "#include \"trainer/$n\"" "$inc/trainer/trainer.h" || notincl="$notincl $n"
done
if [ -z "$notincl" ]; then ok "trainer.h includes every public header"
else bad "trainer.h lacks" "$notincl"; fi
if out="$(printf '#include <trainer/trainer.h>\nint main(void) { return tr_version() == 0; }\n' |
          "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" -x c - 2>&1)"; then
    ok "trainer.h compiles alone (C11, -Wpedantic)"
else bad "trainer.h does not compile alone" "$out"; fi
srcrefs="$(grep -nE '(core/src|strategies/|plugins/|tests/|tools/)[a-z_/]*\.[ch]\b|DESIGN\.md' "$inc"/trainer/*.h)"
if [ -z "$srcrefs" ]; then ok "the headers cite no source file"
else bad "headers cite source files" "$srcrefs"; fi
cited="$(grep -ho 'docs/[a-z_-]*\.md' "$inc"/trainer/*.h | sort -u)"
gone=""
for d in $cited; do [ -f "$inc/../../$d" ] || gone="$gone $d"; done
if [ -z "$gone" ]; then ok "the docs the headers cite exist"
else bad "headers cite missing docs" "$gone"; fi
finish
