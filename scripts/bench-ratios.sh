#!/usr/bin/env bash
# Runs the telemetry micro-benchmarks and prints each of ours next to its
# peer from the SAME run, as a ratio. Absolute times on a shared machine are
# noise; the ratios are the claims.
#
#   scripts/bench-ratios.sh              # default: -count 5 -benchtime 1s
#   COUNT=3 BENCHTIME=300ms scripts/bench-ratios.sh
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT="${COUNT:-5}"
BENCHTIME="${BENCHTIME:-1s}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

go test -run '^$' -bench . -benchmem -count "$COUNT" -benchtime "$BENCHTIME" \
  ./lens/ ./telemetry/metrics/ | tee "$out" | grep -E '^(Benchmark|ok|FAIL)' >&2

# Median ns/op and max allocs/op per benchmark name (the -N CPU suffix cut).
awk -v want_header=1 '
function median(name,   n, i, j, t, a) {
  n = split(vals[name], a, " ")
  for (i = 2; i <= n; i++) { t = a[i]; j = i - 1; while (j > 0 && a[j] > t) { a[j+1] = a[j]; j-- } a[j+1] = t }
  return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
/^Benchmark/ {
  name = $1; sub(/-[0-9]+$/, "", name)
  for (i = 2; i <= NF; i++) {
    if ($(i) == "ns/op") vals[name] = vals[name] " " $(i-1)
    if ($(i) == "allocs/op" && $(i-1) + 0 > allocs[name] + 0) allocs[name] = $(i-1)
  }
  seen[name] = 1
}
function row(label, ours, peer, target,   o, p, r, verdict) {
  if (!(ours in seen) || !(peer in seen)) { printf "%-44s missing\n", label; return }
  o = median(ours); p = median(peer); r = o / p
  verdict = (r <= target) ? "ok" : "MISSED"
  printf "%-44s %9.2f ns  %9.2f ns  %6.3fx  <= %.2fx  %s\n", label, o, p, r, target, verdict
}
function abs(label, ours, limit,   o, verdict) {
  if (!(ours in seen)) { printf "%-44s missing\n", label; return }
  o = median(ours); verdict = (o <= limit) ? "ok" : "MISSED"
  printf "%-44s %9.2f ns  %12s  %7s  <= %.0f ns   %s\n", label, o, "", "", limit, verdict
}
END {
  printf "%-44s %12s  %12s  %7s  %8s\n", "measure", "ours", "peer", "ratio", "target"
  abs("gate off", "BenchmarkGate/off", 1)
  abs("gate on", "BenchmarkGate/on", 1)
  row("gate off vs bare atomic load", "BenchmarkGate/off", "BenchmarkGate/floor-atomic-load", 1.5)
  abs("disabled site (gate + span start)", "BenchmarkDisabledSite", 1)
  abs("RecordVerify off, serial", "BenchmarkRecordVerify/off/serial", 2)
  abs("RecordVerify off, parallel", "BenchmarkRecordVerify/off/parallel", 2)
  abs("RecordRolloutDuration off, serial", "BenchmarkRecordRolloutDuration/off/serial", 2)
  abs("RecordRollout off, serial", "BenchmarkRecordRollout/off/serial", 2)
  abs("RecordActiveServers off, serial", "BenchmarkRecordActiveServers/off/serial", 2)
  row("RecordVerify on vs bare histogram, serial", "BenchmarkRecordVerify/on/serial", "BenchmarkPeerBareHistogramRecord/serial", 1.3)
  row("RecordVerify on vs bare histogram, parallel", "BenchmarkRecordVerify/on/parallel", "BenchmarkPeerBareHistogramRecord/parallel", 1.3)
  row("RecordRolloutDuration on vs bare, serial", "BenchmarkRecordRolloutDuration/on/serial", "BenchmarkPeerBareHistogramRecord/serial", 1.1)
  row("RecordRolloutDuration on vs bare, parallel", "BenchmarkRecordRolloutDuration/on/parallel", "BenchmarkPeerBareHistogramRecord/parallel", 1.1)
  print ""
  bad = 0
  for (n in allocs) if (allocs[n] + 0 > 0 && n !~ /Peer/) { printf "allocs: %s %s allocs/op\n", n, allocs[n]; bad = 1 }
  if (!bad) print "allocs: 0 allocs/op on every record path and on the disabled site"
}' "$out"

# The parallel record paths, pair by pair: PAIRS separate runs of the test
# binary, each measuring ours and the bare histogram back to back, so every
# run gives a ratio of its own. Under b.RunParallel the SDK histogram's
# per-point mutex makes single runs bimodal; the target is held by every
# run, not by a median.
PAIRS="${PAIRS:-5}"
bin=$(mktemp)
trap 'rm -f "$out" "$bin"' EXIT
go test -c -o "$bin" ./telemetry/metrics/
echo
printf '%-44s %12s  %12s  %7s  %8s\n' "RecordVerify on vs bare, parallel, per run" "ours" "peer" "ratio" "target"
missed=0
for i in $(seq "$PAIRS"); do
  line=$("$bin" -test.run '^$' -test.bench 'BenchmarkRecordVerify/on/parallel$|BenchmarkPeerBareHistogramRecord/parallel$' \
    -test.benchtime "$BENCHTIME" | awk '/^BenchmarkPeer/ { p = $3 } /^BenchmarkRecordVerify/ { o = $3 } END { printf "%s %s", o, p }')
  read -r o p <<<"$line"
  r=$(awk -v o="$o" -v p="$p" 'BEGIN { printf "%.3f", o / p }')
  v=ok
  awk -v r="$r" 'BEGIN { exit !(r > 1.3) }' && { v=MISSED; missed=$((missed + 1)); }
  printf '%-44s %9.2f ns  %9.2f ns  %6sx  <= 1.30x  %s\n' "run $i" "$o" "$p" "$r" "$v"
done
echo "RecordVerify parallel: $((PAIRS - missed)) of $PAIRS runs within 1.3x of the bare histogram"
