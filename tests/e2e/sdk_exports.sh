#!/usr/bin/env bash
# What libtrainer exports (docs/abi.md, "What libtrainer exports"):
# - every dynamic symbol it defines, function or data, starts with `tr_` (the core is built
#   with -fvisibility=hidden; TR_API in <trainer/export.h> marks the public API);
# - every function a public header declares TR_API is exported, and no top-level declaration
#   of a tr_ function in those headers lacks TR_API (it would link and then fail to load);
# - the application's entry points (the CLI's private headers APP_HEADER...) are exported too,
#   and nothing else: libtrainer exports exactly the TR_API functions of both;
# - the plugins, shipped and test ones, and the CLI import from libtrainer only what it exports,
#   and no plugin imports an application entry point;
# - <trainer/trainer.h> includes every public header and compiles alone as C11;
# - the headers cite no file of the source tree but the installed docs (docs/NAME.md);
# - docs/abi.md states the number of functions exported.
# usage: sdk_exports.sh LIBTRAINER INCLUDE_DIR BUILD_DIR CC APP_HEADER...
set -u
lib="$1"; inc="$2"; build="$3"; cc="$4"; shift 4; apps=("$@"); here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
command -v nm >/dev/null || { echo "nm not found: skipped"; exit 77; }

defined="$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)"
n="$(wc -l <<<"$defined")"
foreign="$(grep -v '^tr_' <<<"$defined")"
if [ "$n" -gt 100 ] && [ -z "$foreign" ]; then ok "all $n symbols libtrainer defines start with tr_"
else bad "libtrainer exports names without tr_ ($n defined)" "$(head -20 <<<"$foreign" | tr '\n' ' ')"; fi
doc="$(grep -o 'libtrainer.so` lists [0-9]* functions' "$here/../../docs/abi.md" | grep -o '[0-9][0-9]*')"
if [ "${doc:-}" = "$n" ]; then ok "docs/abi.md states the $n exported functions"
else bad "docs/abi.md says ${doc:-no number of} functions, libtrainer exports $n"; fi
data="$(nm -D --defined-only "$lib" | awk 'NF == 3 && $2 !~ /^[TtWwi]$/ {print $3}')"
if [ -z "$data" ]; then ok "libtrainer exports functions only, no data"
else bad "libtrainer exports data" "$(tr '\n' ' ' <<<"$data")"; fi

tr_api() { grep -ho '^TR_API[^(]*(' "$@" | grep -o 'tr_[a-z0-9_]*($' | tr -d '(' | sort -u; }
public="$(tr_api "$inc"/trainer/*.h)"
app="$(tr_api "${apps[@]}")"
declared="$(sort -u <(echo "$public") <(echo "$app"))"
unexported="$(comm -23 <(echo "$declared") <(echo "$defined"))"
if [ -n "$public" ] && [ -n "$app" ] && [ -z "$unexported" ]; then
    ok "all $(wc -l <<<"$public") TR_API functions of the SDK and the $(wc -l <<<"$app") of the application are exported"
else bad "declared TR_API but not exported" "$(tr '\n' ' ' <<<"$unexported")"; fi
both="$(comm -12 <(echo "$public") <(echo "$app"))"
if [ -z "$both" ]; then ok "the installed headers declare none of the application's entry points"
else bad "application entry points in the installed headers" "$(tr '\n' ' ' <<<"$both")"; fi
unmarked="$(grep -nE '^[A-Za-z].*[ *]tr_[a-z0-9_]+\(' "$inc"/trainer/*.h "${apps[@]}" | grep -vE '^[^:]*:[0-9]+:(TR_API|typedef|static|#)')"
if [ -z "$unmarked" ]; then ok "every tr_ function the public headers declare is marked TR_API"
else bad "public declarations without TR_API" "$unmarked"; fi
extra="$(comm -13 <(echo "$declared") <(echo "$defined"))"
if [ -z "$extra" ]; then ok "libtrainer exports nothing its headers do not declare"
else bad "exported but declared nowhere public" "$(tr '\n' ' ' <<<"$extra")"; fi

missing=""; appuse=""
# The test plugins too, but for the fixtures that call a function of a newer ABI on purpose.
for f in $(find "$build/plugins" "$build/bin" "$build/test_plugins" -maxdepth 3 -type f \( -name '*.so' -o -name trainer \) \
           -not -path '*/test_plugins/newer/*'); do
    imports="$(nm -D --undefined-only "$f" | awk '{print $2}' | grep '^tr_' | sort -u)"
    m="$(comm -23 <(echo "$imports") <(echo "$defined"))"
    [ -z "$m" ] || missing="$missing $(basename "$f"): $(tr '\n' ' ' <<<"$m")"
    a="$(comm -12 <(echo "$imports") <(echo "$app"))"
    [ "$(basename "$f")" = trainer ] || [ -z "$a" ] || appuse="$appuse $(basename "$f"): $(tr '\n' ' ' <<<"$a")"
done
if [ -z "$missing" ]; then ok "the plugins (shipped and test) and the CLI use only exported functions"
else bad "imports libtrainer does not export" "$missing"; fi
if [ -z "$appuse" ]; then ok "no plugin calls an application entry point"
else bad "plugins calling the application" "$appuse"; fi
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
