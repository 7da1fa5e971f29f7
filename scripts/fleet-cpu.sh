#!/usr/bin/env bash
# Where a rollout's CPU goes, per process, telemetry off vs on: runs the
# built-in fleet (`gymlens run`, model latency MODEL_LATENCY_MS, default 0) with GYM_RUNSTATS_DIR set,
# waits WARMUP seconds, then signals every process (SIGUSR1) at the start
# and the end of a WINDOW-second steady-state window, and divides each
# process's CPU time, allocations and GC cycles over the window by the
# rollouts completed in it. Start-up, the final flush and the summary's
# read-back are outside the window. Variants alternate over ROUNDS rounds.
#
#   scripts/fleet-cpu.sh
#   ROUNDS=3 WINDOW=5 SPANS=all scripts/fleet-cpu.sh
#   SAMPLER=parentbased_traceidratio SAMPLER_ARG=0.01 scripts/fleet-cpu.sh
#   MODEL_LATENCY_MS=20 CONCURRENCY=4 scripts/fleet-cpu.sh
#   VARIANTS="off on metrics traces" scripts/fleet-cpu.sh
#                                   # metrics: traces off; traces: metrics off;
#                                   # every variant is compared with the first
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-2}"
WARMUP="${WARMUP:-2.5}"
WINDOW="${WINDOW:-3}"
CONCURRENCY="${CONCURRENCY:-16}"
ROLLOUTS="${ROLLOUTS:-150000}" # enough to outlast warm-up and window
SPANS="${SPANS:-default}"
MODEL_LATENCY_MS="${MODEL_LATENCY_MS:-0}"
# shellcheck source=lib/load.sh
source scripts/lib/load.sh # set_clean_env, alternate_rounds, check_variants, telemetry_variant
read -r -a variants <<<"${VARIANTS:-off on}"
check_variants fleet-cpu "${variants[@]}"
[ "${#variants[@]}" -ge 2 ] || { echo "fleet-cpu: VARIANTS needs two or more variants" >&2; exit 2; }
work=$(mktemp -d)
gp=""
cleanup() {
  if [ -n "$gp" ] && kill -0 "$gp" 2>/dev/null; then
    kill -INT "$gp" 2>/dev/null || true
    wait "$gp" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/gymlens" ./cmd/gymlens
# Only this script's settings reach the runs.
set_clean_env

one() { # variant round
  local variant=$1 round=$2 stats="$work/stats" runs="$work/runs"
  rm -rf "$stats" "$runs"
  mkdir -p "$stats" "$runs"
  telemetry_variant "$variant"
  local flags=(${variant_flags[@]+"${variant_flags[@]}"}) extra=(${variant_env[@]+"${variant_env[@]}"})
  # env execs gym, so $! is gym's pid and the signals below reach it.
  env ${clean_env[@]+"${clean_env[@]}"} ${extra[@]+"${extra[@]}"} GYM_RUNSTATS_DIR="$stats" NEMO_GYM_OTEL_SPAN_GROUPS="$SPANS" \
    ${SAMPLER:+OTEL_TRACES_SAMPLER="$SAMPLER"} ${SAMPLER_ARG:+OTEL_TRACES_SAMPLER_ARG="$SAMPLER_ARG"} "$work/gymlens" run --rollouts "$ROLLOUTS" \
    --concurrency "$CONCURRENCY" --model-latency-ms "$MODEL_LATENCY_MS" --runs-dir "$runs" --quiet ${flags[@]+"${flags[@]}"} \
    >"$work/run.out" 2>"$work/run.err" &
  gp=$!
  local f="" pids a b i
  # The warm-up starts with the first rollout written (the fleet is up).
  for ((i = 0; i < 600; i++)); do
    f=$(ls "$runs"/*/rollouts.jsonl 2>/dev/null || true)
    [ -n "$f" ] && [ -s "$f" ] && break
    kill -0 "$gp" 2>/dev/null || { echo "gymlens run exited early:" >&2; tail -n 5 "$work/run.err" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$f" ] || { echo "no rollouts after 60 s" >&2; exit 1; }
  sleep "$WARMUP"
  pids="$gp $(pgrep -P "$gp" | tr '\n' ' ')"
  a=$(wc -l <"$f")
  # shellcheck disable=SC2086
  kill -USR1 $pids
  sleep "$WINDOW"
  b=$(wc -l <"$f")
  # shellcheck disable=SC2086
  kill -USR1 $pids
  # Each process writes its second line when the signal reaches it.
  for ((i = 0; i < 200; i++)); do
    [ "$(cat "$stats"/*.runstats 2>/dev/null | grep -c event=signal)" -ge "$((2 * $(ls "$stats"/*.runstats | wc -l)))" ] && break
    sleep 0.05
  done
  kill -INT "$gp"
  wait "$gp" || true
  gp=""
  local n=$((b - a))
  awk -v n="$n" -v w="$WINDOW" -v v="$variant" -v r="$round" 'BEGIN { printf "%s (round %d): %.0f rollouts/s in the window\n", v, r, n / w }'
  local total
  total=$(awk -v n="$n" '/event=signal/ {
      for (i = 1; i <= NF; i++) { split($i, kv, "="); cur[kv[1]] = kv[2] }
      if (seen[FILENAME]++) t += cur["user_us"] + cur["sys_us"] - prev[FILENAME]
      prev[FILENAME] = cur["user_us"] + cur["sys_us"] }
    END { printf "%.1f", t / n }' "$stats"/*.runstats)
  fleet_cpu["$variant $round"]=$total
  echo "  fleet         cpu $total us per rollout, all processes"
  for x in "$stats"/*.runstats; do
    awk -v n="$n" -v name="$(basename "$x" .runstats)" '
      /event=signal/ {
        for (i = 1; i <= NF; i++) { split($i, kv, "="); cur[kv[1]] = kv[2] }
        if (seen++) {
          printf "  %-13s cpu %6.1f us (user %5.1f, sys %5.1f)  allocs %6.1f  bytes %6.0f  gc cycles/s %4.0f\n", name,
            (cur["user_us"] + cur["sys_us"] - prev["user_us"] - prev["sys_us"]) / n,
            (cur["user_us"] - prev["user_us"]) / n, (cur["sys_us"] - prev["sys_us"]) / n,
            (cur["mallocs"] - prev["mallocs"]) / n, (cur["alloc_bytes"] - prev["alloc_bytes"]) / n,
            (cur["gc_cycles"] - prev["gc_cycles"]) / ((cur["time_ns"] - prev["time_ns"]) / 1e9)
        }
        for (k in cur) prev[k] = cur[k]
      }' "$x"
  done
}

declare -A fleet_cpu # "variant round" -> CPU us per rollout, all processes
echo "span groups when on: $SPANS, sampler ${SAMPLER:-default}${SAMPLER_ARG:+ $SAMPLER_ARG}, model latency $MODEL_LATENCY_MS ms; variants ${variants[*]} alternate over $ROUNDS rounds"
alternate_rounds "$ROUNDS" one "${variants[@]}"
declare -A m_cpu # variant -> median over the rounds
for v in "${variants[@]}"; do
  c=()
  for i in $(seq "$ROUNDS"); do c+=("${fleet_cpu["$v $i"]}"); done
  m_cpu[$v]=$(printf '%s\n' "${c[@]}" | median)
done
base=${variants[0]}
for v in "${variants[@]:1}"; do
  awk -v on="${m_cpu[$v]}" -v off="${m_cpu[$base]}" -v v="$v" -v b="$base" 'BEGIN {
    printf "fleet CPU per rollout (median of the rounds): %s %.1f us, %s %.1f us, %s/%s %.3f, %s adds %.1f%%\n", b, off, v, on, v, b, on / off, v, (on / off - 1) * 100 }'
done
