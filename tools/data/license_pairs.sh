#!/usr/bin/env bash
# Makes a scored text-pair set (`score<TAB>query<TAB>passage`, the text dataset's mode pairs)
# from the license lines of tools/data/license_lines.sh, in their shuffled order: an even line
# is paired with itself reworded (its words rotated by half: the second half first), score 1;
# an odd line with the line before it, score 0. So half the pairs are related, and telling
# them apart takes what the texts contain, not where their words stand. The last 10% are the
# validation split of configs/text_pairs.yaml.
# usage: tools/data/license_pairs.sh [OUT.tsv]     (default: data/license_pairs.tsv)
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/data/license_pairs.tsv}"
mkdir -p "$(dirname "$out")"
lines="$out.lines.$$"
trap 'rm -f "$lines" "$out.tmp.$$"' EXIT
"$root/tools/data/license_lines.sh" "$lines" >/dev/null
awk -F '\t' 'NR % 2 == 0 { n = split($2, w, " "); h = int(n / 2); r = ""
                             for (i = 1; i <= n; i++) r = r (i > 1 ? " " : "") w[(i + h - 1) % n + 1]
                             print "1\t" $2 "\t" r }
              NR % 2 == 1 && NR > 1 { print "0\t" prev "\t" $2 }
              { prev = $2 }' "$lines" >"$out.tmp.$$"
mv "$out.tmp.$$" "$out"
echo "$out: $(wc -l <"$out") pairs, $(grep -c '^1' "$out") scored 1"
