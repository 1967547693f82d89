# Shared by the benchmark scripts (source it): median of whitespace-separated numbers, and the
# throughput a `trainer` log reports.
# median: stdin numbers -> their median
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# sps: a run's log -> training samples/s in the steady state (the median of the logged
# windows after the first, which includes warm-up)
sps() { sed -n 's/.*step [0-9]*\/[0-9]*  .*  \([0-9]*\) samples\/s.*/\1/p' | tail -n +2 | median; }
# isps: an eval/predict log -> inference samples/s
isps() { sed -n 's/.*inference: .*(\([0-9]*\) samples\/s.*/\1/p' | tail -1; }
