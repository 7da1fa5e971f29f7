#!/usr/bin/env bash
# The live view stays bounded however long the run: runs the built-in
# fleet for ROLLOUTS rollouts (telemetry off, model latency 0), reads the
# head's status API every INTERVAL seconds with the most rollouts it lists
# (`gymlens top --once --json --limit 500`, what a user's top or live page
# reads at most), and checks that no snapshot grows past MAX_KIB; then that
# the run's last snapshot (status.json) counts exactly the lines of the
# rollouts files. Prints the snapshot's size and the rollouts done at each
# read.
#
#   scripts/live-bound.sh                       # 100 000 rollouts (about 1-2 min)
#   ROLLOUTS=20000 INTERVAL=1 scripts/live-bound.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROLLOUTS="${ROLLOUTS:-100000}"
INTERVAL="${INTERVAL:-2}"
MAX_KIB="${MAX_KIB:-512}"
work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/gymlens" ./cmd/gymlens
cd "$work"
# Telemetry off (the view does not need it), the live view on.
env -u GYMLENS_LIVE NEMO_GYM_OTEL_ENABLED=0 ./gymlens run --rollouts "$ROLLOUTS" --concurrency 32 --runs-dir "$work/runs" \
  >"$work/run.out" 2>"$work/run.err" &
pid=$!
head="" token=""
for _ in $(seq 600); do
  if line=$(grep -m1 -o 'gymlens top --head [^ ]* --head-token-file [^ ]*' "$work/run.err" 2>/dev/null); then
    read -r _ _ _ head _ token <<<"$line"
    break
  fi
  kill -0 "$pid" 2>/dev/null || { echo "live-bound: gymlens run ended before it said where to watch it:"; tail -20 "$work/run.err"; exit 1; }
  sleep 0.1
done
[ -n "$head" ] || { echo "live-bound: no status address in a minute"; exit 1; }
max=0 reads=0
while kill -0 "$pid" 2>/dev/null; do
  if ./gymlens top --once --json --limit 500 --head "$head" --head-token-file "$token" >"$work/snap.json" 2>/dev/null; then
    size=$(wc -c <"$work/snap.json")
    done_n=$(grep -o '"done":[0-9]*' "$work/snap.json" | head -1 | cut -d: -f2)
    reads=$((reads + 1))
    [ "$size" -gt "$max" ] && max=$size
    printf 'live-bound: %7s rollouts done, snapshot %7d bytes\n' "${done_n:-?}" "$size"
  fi
  sleep "$INTERVAL"
done
wait "$pid" || { echo "live-bound: gymlens run failed:"; tail -20 "$work/run.err"; exit 1; }
pid=""
run=$(ls -d "$work"/runs/*/)
status="$run/status.json"
done_n=$(grep -o '"done": [0-9]*' "$status" | head -1 | grep -o '[0-9]*$')
failed_n=$(grep -o '"failed": [0-9]*' "$status" | head -1 | grep -o '[0-9]*$')
lines=$(wc -l <"$run/rollouts.jsonl")
failures=$(cat "$run/rollouts_failures.jsonl" 2>/dev/null | wc -l)
echo "live-bound: $reads snapshots read during $ROLLOUTS rollouts, the largest $max bytes (bound $MAX_KIB KiB)"
echo "live-bound: status.json counts done $done_n, failed $failed_n; the run wrote $lines rollouts and $failures failures"
ok=1
[ "$reads" -gt 0 ] || { echo "live-bound: FAIL: no snapshot was read"; ok=0; }
[ "$max" -le $((MAX_KIB * 1024)) ] || { echo "live-bound: FAIL: a snapshot of $max bytes"; ok=0; }
[ "$done_n" = "$lines" ] && [ "$failed_n" = "$failures" ] && [ $((lines + failures)) = "$ROLLOUTS" ] ||
  { echo "live-bound: FAIL: the last snapshot does not count the run's files"; ok=0; }
[ "$ok" = 1 ] && echo "live-bound: PASS"
[ "$ok" = 1 ]
