#!/usr/bin/env bash
# Fleet throughput with telemetry on vs off, measured side by side: the same
# `gym run` (built-in fleet, model latency 0) alternated ROUNDS times so
# machine drift hits both variants alike. Prints rollouts/s per run, the
# median per variant and the on/off ratio.
#
#   scripts/bench-fleet.sh                      # 1000 rollouts, 3 rounds, default preset
#   ROLLOUTS=2000 SPANS=all scripts/bench-fleet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROLLOUTS="${ROLLOUTS:-1000}"
ROUNDS="${ROUNDS:-3}"
CONCURRENCY="${CONCURRENCY:-16}"
SPANS="${SPANS:-default}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gym" ./cmd/gym

# Only this script's settings reach the runs.
clean_env() { env -u OTEL_EXPORTER_OTLP_ENDPOINT $(env | grep -oE '^(NEMO_GYM_OTEL_|NEMO_LENS_)[A-Z_]+' | sed 's/^/-u /') "$@"; }

rate() { # variant -> rollouts/s printed in the summary
  local variant=$1 out
  if [ "$variant" = on ]; then
    out=$(clean_env NEMO_GYM_OTEL_SPAN_GROUPS="$SPANS" "$work/gym" run --rollouts "$ROLLOUTS" \
      --concurrency "$CONCURRENCY" --model-latency-ms 0 --runs-dir "$work/runs" --quiet 2>>"$work/stderr.log")
  else
    out=$(clean_env "$work/gym" run --rollouts "$ROLLOUTS" --concurrency "$CONCURRENCY" \
      --model-latency-ms 0 --runs-dir "$work/runs" --quiet --no-telemetry 2>>"$work/stderr.log")
  fi
  echo "$out" | sed -nE 's/.*rollouts .*, ([0-9.]+)\/s over.*/\1/p'
}

on=(); off=()
for i in $(seq "$ROUNDS"); do
  r_off=$(rate off); r_on=$(rate on)
  echo "round $i: off ${r_off}/s  on ${r_on}/s" >&2
  off+=("$r_off"); on+=("$r_on")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
m_on=$(median "${on[@]}"); m_off=$(median "${off[@]}")
awk -v on="$m_on" -v off="$m_off" -v n="$ROLLOUTS" -v g="$SPANS" 'BEGIN {
  printf "fleet throughput, %d rollouts, span groups %s: off %.1f/s, on %.1f/s, ratio on/off %.3f (target >= 0.9)\n", n, g, off, on, on/off }'
