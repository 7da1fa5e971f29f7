#!/usr/bin/env bash
# Runs every check of gymlens against the released NeMo Gym that
# scripts/upstream.sh installs: the mixed fleets (upstream's launcher,
# agent and collector beside gymlens's servers, and the reverse), one
# trace per rollout across Go and Python in a real Jaeger (built into
# tools/bin the first time), and the differential tests against
# upstream's own models, verifiers, aggregation and launch environment.
# Every such test is named TestUpstream*; each is one check.
#
# Prints the upstream versions, one PASS/FAIL line per check, and last
# "N passed, M failed"; exits 0 only when M is 0. A check that would skip
# (upstream missing) fails here: this script exists to run them.
#
#   scripts/interop-upstream.sh               every check
#   RUN='TestUpstreamLauncher' scripts/interop-upstream.sh   a subset (go test -run)
set -uo pipefail
cd "$(dirname "$0")/.."

py=$(bash scripts/upstream.sh) || { echo "scripts/upstream.sh failed"; echo "0 passed, 1 failed"; exit 1; }
py6=$(bash scripts/upstream.sh --release 0.6.0) || { echo "scripts/upstream.sh --release 0.6.0 failed"; echo "0 passed, 1 failed"; exit 1; }
# The cross-language trace check reads its traces back from a real Jaeger.
ROOT=$PWD
# shellcheck source=lib/tools.sh
source scripts/lib/tools.sh
jaeger=$(build_tool jaeger github.com/jaegertracing/jaeger/cmd/jaeger github.com/jaegertracing/jaeger) ||
  { echo "building tools/bin/jaeger failed"; echo "0 passed, 1 failed"; exit 1; }
export GYMLENS_UPSTREAM_PYTHON="$py" GYMLENS_UPSTREAM_TELEMETRY_PYTHON="$py6" GYMLENS_JAEGER_BIN="$jaeger" CI=true
run="${RUN:-^TestUpstream}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Packages that hold upstream checks: those whose tests use internal/upstream.
pkgs=$(grep -rl --include='*_test.go' 'gymlens/internal/upstream"' . | xargs -n1 dirname | sort -u)
go test -race -count=1 -timeout 30m -v -run "$run" $pkgs >"$log" 2>&1
rc=$?

pass=0 fail=0
while IFS= read -r line; do
  case "$line" in
    "--- PASS: "*) echo "PASS ${line:10}"; pass=$((pass + 1)) ;;
    "--- FAIL: "*|"--- SKIP: "*) echo "FAIL ${line:10}"; fail=$((fail + 1)) ;;
  esac
done < <(grep -E '^--- (PASS|FAIL|SKIP): ' "$log")
# The counts the differential tests log ("N bodies, N agree", ...).
grep -E '^\s+\S+_test\.go:[0-9]+: .*(agree|equal|rollouts through|one trace in Jaeger)' "$log" | sed 's/^ *//'
if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
  # A build failure or a panic outside any test: show it, count it.
  tail -n 40 "$log"
  fail=$((fail + 1))
fi
if [ "$fail" -ne 0 ]; then
  echo "--- output of the failed checks (last 80 lines):"
  tail -n 80 "$log"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
