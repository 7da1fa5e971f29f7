#!/usr/bin/env bash
# Runs every native Go fuzz target for FUZZTIME, one target at a time, and
# prints one line per target. Exits non-zero when any target fails; the
# failing target's output (with the path of the input it saved under
# testdata/fuzz/) follows its line.
#
#   scripts/fuzz.sh                          # 15s per target
#   FUZZTIME=2m scripts/fuzz.sh
#   scripts/fuzz.sh FuzzVerify FuzzRunBody   # only these targets
#   FUZZFLAGS='-fuzzminimizetime 50x' scripts/fuzz.sh   # explore more, minimise less
#
# Plain `go test` already runs every target's seed corpus; this script is
# the part that generates new inputs.
#
# Go 1.26's fuzz coordinator can end a run that found nothing with a bare
# "context deadline exceeded" when -fuzztime expires under CPU contention
# (golang/go#75804, fixed in Go 1.27). A real finding always writes its
# input ("Failing input written to ..."), so such a run is retried once,
# and reported as FLAKE, not a failure, if it happens again.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-15s}"
FUZZFLAGS="${FUZZFLAGS:-}"

# package target
targets=(
  "./lens FuzzLoadConfig"
  "./telemetry FuzzResolveSpanGroups"
  "./telemetry FuzzConfigFromYAML"
  "./orchestrator FuzzParseFleetConfig"
  "./servers/resources FuzzVerify"
  "./servers/agent FuzzRunBody"
  "./protocol FuzzVerifyRequestRoundTrip"
  "./servers/resources/equivalence FuzzRatio"
  "./servers/resources/stringmatch FuzzLabelScanner"
  "./gymconfig FuzzResolve"
  "./contract FuzzListenAddr"
  "./gymconfig FuzzScrubURLs"
  "./cmd/gym FuzzParseArgs"
  "./cmd/gym FuzzRunIdentity"
)

selected() { # target -> true when no names were given or it is one of them
  [ $# -eq 1 ] && return 0
  local want=$1 name
  shift
  for name in "$@"; do [ "$name" = "$want" ] && return 0; done
  return 1
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
ran=0
for entry in "${targets[@]}"; do
  read -r pkg name <<<"$entry"
  selected "$name" "$@" || continue
  ran=$((ran + 1))
  start=$SECONDS
  result=fail
  for attempt in 1 2; do
    # shellcheck disable=SC2086 # FUZZFLAGS is a list of flags
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" $FUZZFLAGS "$pkg" >"$log" 2>&1; then
      result=ok
      break
    fi
    if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
      result=flake
      continue
    fi
    result=fail
    break
  done
  if [ "$result" = ok ]; then
    execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    printf 'ok    %-24s %-20s %4ds  %s execs\n' "$name" "$pkg" $((SECONDS - start)) "${execs:-?}"
  elif [ "$result" = flake ]; then
    printf 'FLAKE %-24s %-20s %4ds  twice a bare "context deadline exceeded", no input written (golang/go#75804)\n' "$name" "$pkg" $((SECONDS - start))
  else
    printf 'FAIL  %-24s %-20s %4ds\n' "$name" "$pkg" $((SECONDS - start))
    sed 's/^/      /' "$log"
    failed=1
  fi
done
if [ "$ran" -eq 0 ]; then
  echo "no fuzz target matches: $*" >&2
  exit 2
fi
exit "$failed"
