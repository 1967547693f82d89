#!/usr/bin/env bash
# Makes a `label<TAB>text` classification set from the license texts every Debian system
# ships in /usr/share/common-licenses: each non-blank line of at least 20 characters,
# labelled with the license it comes from (apache, gfdl, gpl, mpl), in a fixed pseudo-random
# order (the last 10% are the validation split of configs/text_classifier.yaml).
# usage: tools/data/license_lines.sh [OUT.tsv]     (default: data/licenses.tsv)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/data/licenses.tsv}"
src=/usr/share/common-licenses
for f in Apache-2.0 GFDL-1.3 GPL-3 MPL-2.0; do
    [ -r "$src/$f" ] || { echo "license_lines.sh: $src/$f not found (Debian's base-files ships it)" >&2; exit 1; }
done
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# The order key is a multiplicative hash of the line number: the same file with any awk.
for pair in apache:Apache-2.0 gfdl:GFDL-1.3 gpl:GPL-3 mpl:MPL-2.0; do
    awk -v label="${pair%%:*}" '{ gsub(/\t/, " "); gsub(/^ +| +$/, "") } length($0) >= 20 { print label "\t" $0 }' \
        "$src/${pair#*:}"
done | awk '{ printf "%.0f\t%s\n", (NR * 2654435761) % 4294967291, $0 }' | sort -n | cut -f2- >"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "$out: $(wc -l <"$out") lines"
