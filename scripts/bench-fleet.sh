#!/usr/bin/env bash
# Fleet throughput with telemetry on vs off, measured side by side: the same
# `gymlens run` (built-in fleet, model latency MODEL_LATENCY_MS, default 0) alternated ROUNDS times so
# machine drift hits every variant alike. Prints rollouts/s per run, the
# median per variant and each variant's ratio to off, for the whole run
# and for its rollout phase alone (the run less the closing
# /aggregate_metrics calls, which `gymlens run` reports as its aggregation
# phase), the aggregation phase's median seconds and share of the run,
# then the peak
# resident set size of every process (median per variant) for off and the
# first other variant (on by default), and their ratio.
#
#   scripts/bench-fleet.sh                      # 2000 rollouts, 3 rounds, default preset
#   ROLLOUTS=20000 ROUNDS=5 scripts/bench-fleet.sh
#   SPANS=all scripts/bench-fleet.sh
#   SAMPLER=parentbased_traceidratio SAMPLER_ARG=0.01 scripts/bench-fleet.sh
#                                               # head sampling (OTEL_TRACES_SAMPLER[_ARG])
#   MODEL_LATENCY_MS=20 scripts/bench-fleet.sh  # a model that takes 20 ms per call
#   ON_ENV='NEMO_GYM_OTEL_TRACES_ENABLED=0' scripts/bench-fleet.sh
#                                               # extra VAR=value settings (space-separated) for every
#                                               # variant but off; every other telemetry variable of
#                                               # the caller's environment is cleared
#   VARIANTS="off on metrics traces" scripts/bench-fleet.sh
#                                               # metrics: traces off; traces: metrics off; all of them
#                                               # alternate in every round, each compared with off
#
# Targets (TARGET overrides): rollouts/s on/off >= 0.85 with the default
# preset at full sampling, >= 0.8 with all, >= 0.97 with a sampler argument
# of 0.01 or less (held to the rollout phase's ratio), >= 0.99 with a model
# latency of 10 ms or more; the aggregation phase <= 2 % of the run; peak RSS of each server on/off <= 1.25. The peak RSS comes from the
# processes themselves: every gym process run with GYM_RUNSTATS_DIR writes
# its counters, max_rss_kib among them, when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/load.sh
source scripts/lib/load.sh # median, set_clean_env, alternate_rounds, check_variants, telemetry_variant
ROLLOUTS="${ROLLOUTS:-2000}"
ROUNDS="${ROUNDS:-3}"
CONCURRENCY="${CONCURRENCY:-16}"
SPANS="${SPANS:-default}"
MODEL_LATENCY_MS="${MODEL_LATENCY_MS:-0}"
read -r -a variants <<<"${VARIANTS:-off on}"
case " ${variants[*]} " in *" off "*) ;; *) echo "bench-fleet: VARIANTS must include off, the baseline" >&2; exit 2 ;; esac
check_variants bench-fleet "${variants[@]}"
[ "${#variants[@]}" -ge 2 ] || { echo "bench-fleet: VARIANTS needs off and one more" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gymlens" ./cmd/gymlens

# Only this script's settings reach the runs.
set_clean_env

declare -A rates # "variant round" -> rollouts/s
declare -A phase_rates # "variant round" -> rollouts/s of the rollout phase
declare -A agg_secs # "variant round" -> seconds of the aggregation phase
declare -A run_secs # "variant round" -> seconds of the whole run
rate() { # variant round: one gymlens run, its rollouts/s stored in rates
  local variant=$1 round=$2 out stats="$work/stats/$1-$2"
  mkdir -p "$stats"
  telemetry_variant "$variant"
  local flags=(${variant_flags[@]+"${variant_flags[@]}"}) extra=(${variant_env[@]+"${variant_env[@]}"})
  # shellcheck disable=SC2206 # ON_ENV is a list of VAR=value words
  [ "$variant" != off ] && [ -n "${ON_ENV:-}" ] && extra+=($ON_ENV)
  out=$(env ${clean_env[@]+"${clean_env[@]}"} GYM_RUNSTATS_DIR="$stats" NEMO_GYM_OTEL_SPAN_GROUPS="$SPANS" ${extra[@]+"${extra[@]}"} \
    ${SAMPLER:+OTEL_TRACES_SAMPLER="$SAMPLER"} ${SAMPLER_ARG:+OTEL_TRACES_SAMPLER_ARG="$SAMPLER_ARG"} "$work/gymlens" run \
    --rollouts "$ROLLOUTS" --concurrency "$CONCURRENCY" --model-latency-ms "$MODEL_LATENCY_MS" --runs-dir "$work/runs" --quiet \
    ${flags[@]+"${flags[@]}"} 2>>"$work/stderr.log")
  rm -rf "$work/runs"
  rates["$variant $round"]=$(echo "$out" | sed -nE 's/.*rollouts .*, ([0-9.]+)\/s over.*/\1/p')
  [ -n "${rates["$variant $round"]}" ] || { echo "bench-fleet: no rate from gymlens run ($variant, round $round); see $work/stderr.log" >&2; exit 1; }
  # "phases          rollouts 12.345 s, aggregation 0.123 s" (no line when aggregation is off).
  local ph n roll agg
  ph=$(echo "$out" | sed -nE 's/^ *phases +rollouts ([0-9.]+) s, aggregation ([0-9.]+) s.*/\1 \2/p')
  n=$(echo "$out" | sed -nE 's/^ *rollouts +([0-9]+) .*/\1/p' | head -n 1)
  [ -n "$ph" ] || ph="0 0"
  read -r roll agg <<<"$ph"
  agg_secs["$variant $round"]=$agg
  run_secs["$variant $round"]=$(awk -v r="$roll" -v a="$agg" 'BEGIN { printf "%.3f", r + a }')
  phase_rates["$variant $round"]=$(awk -v n="$n" -v r="$roll" -v whole="${rates["$variant $round"]}" 'BEGIN { if (r > 0) printf "%.1f", n / r; else print whole }')
}

# The variants alternate, their order reversed every other round, so a
# machine that speeds up or slows down over the session favours none.
alternate_rounds "$ROUNDS" rate "${variants[@]}"
target=0.85
[ "$SPANS" = all ] && target=0.8
if [ -n "${SAMPLER_ARG:-}" ] && awk -v a="$SAMPLER_ARG" 'BEGIN { exit !(a <= 0.01) }'; then target=0.97; fi
[ "$MODEL_LATENCY_MS" -ge 10 ] && target=0.99
# At 1 % sampling the target is the rollout phase's: the aggregation phase
# is the same on and off and would pull the whole run's ratio towards 1.
phase_target=""
if [ -n "${SAMPLER_ARG:-}" ] && awk -v a="$SAMPLER_ARG" 'BEGIN { exit !(a <= 0.01) }'; then phase_target="${TARGET:-0.97}"; fi
target="${TARGET:-$target}"
off=()
for i in $(seq "$ROUNDS"); do off+=("${rates["off $i"]}"); done
m_off=$(printf '%s\n' "${off[@]}" | median)
for v in "${variants[@]}"; do
  [ "$v" = off ] && continue
  on=(); paired=()
  for i in $(seq "$ROUNDS"); do
    r_off=${rates["off $i"]}; r_on=${rates["$v $i"]}
    p=$(awk -v a="$r_on" -v b="$r_off" 'BEGIN { printf "%.3f", a / b }')
    echo "round $i: off ${r_off}/s  $v ${r_on}/s  $v/off $p" >&2
    on+=("$r_on"); paired+=("$p")
  done
  m_on=$(printf '%s\n' "${on[@]}" | median)
  m_paired=$(printf '%s\n' "${paired[@]}" | median)
  # The target is the whole telemetry's (on); the halves are for reading.
  t=""
  [ "$v" = on ] && t=" (target >= $target)"
  [ "$v" = on ] && [ -n "$phase_target" ] && t=" (the target is the rollout phase's)"
  awk -v on="$m_on" -v off="$m_off" -v n="$ROLLOUTS" -v g="$SPANS" -v t="$t" -v mp="$m_paired" -v ml="$MODEL_LATENCY_MS" -v v="$v" -v sm="${SAMPLER:-default}${SAMPLER_ARG:+ $SAMPLER_ARG}${ON_ENV:+, with $ON_ENV}" 'BEGIN {
    printf "fleet throughput, %d rollouts, span groups %s, model latency %s ms, sampler %s: off %.1f/s, %s %.1f/s, ratio %s/off %.3f%s; median of the rounds\x27 own ratios %.3f\n", n, g, ml, sm, off, v, on, v, on/off, t, mp }'
  # The rollout phase alone: the same runs, less their aggregation phase.
  p_on=(); p_off=(); p_paired=()
  for i in $(seq "$ROUNDS"); do
    p_off+=("${phase_rates["off $i"]}"); p_on+=("${phase_rates["$v $i"]}")
    p_paired+=("$(awk -v a="${phase_rates["$v $i"]}" -v b="${phase_rates["off $i"]}" 'BEGIN { printf "%.3f", a / b }')")
  done
  t=""
  [ "$v" = on ] && [ -n "$phase_target" ] && t=" (target >= $phase_target)"
  awk -v on="$(printf '%s\n' "${p_on[@]}" | median)" -v off="$(printf '%s\n' "${p_off[@]}" | median)" -v v="$v" -v t="$t" \
    -v mp="$(printf '%s\n' "${p_paired[@]}" | median)" 'BEGIN {
    printf "rollout phase: off %.1f/s, %s %.1f/s, ratio %s/off %.3f%s; median of the rounds\x27 own ratios %.3f\n", off, v, on, v, on/off, t, mp }'
done

# The aggregation phase: seconds per run, and its share of the run's wall
# time (median per variant).
for v in "${variants[@]}"; do
  a=(); share=()
  for i in $(seq "$ROUNDS"); do
    a+=("${agg_secs["$v $i"]}")
    share+=("$(awk -v a="${agg_secs["$v $i"]}" -v r="${run_secs["$v $i"]}" 'BEGIN { printf "%.4f", (r > 0) ? a / r : 0 }')")
  done
  awk -v v="$v" -v s="$(printf '%s\n' "${a[@]}" | median)" -v f="$(printf '%s\n' "${share[@]}" | median)" -v all="${a[*]}" 'BEGIN {
    printf "aggregation phase %-8s %.3f s (runs: %s), %.1f %% of the run (target <= 2 %%)\n", v, s, all, 100 * f }'
done

# Peak RSS per process: the exit line of each <name>.runstats.
peak() { # variant name -> one peak (KiB) per round
  for i in $(seq "$ROUNDS"); do
    sed -nE 's/^event=exit .*max_rss_kib=([0-9]+).*/\1/p' "$work/stats/$1-$i/$2.runstats" 2>/dev/null | tail -n 1
  done
}
cmp=${variants[1]}
[ "$cmp" = off ] && cmp=${variants[0]}
for f in "$work"/stats/"$cmp"-1/*.runstats; do
  name=$(basename "$f" .runstats)
  mapfile -t p_on < <(peak "$cmp" "$name"); mapfile -t p_off < <(peak off "$name")
  [ ${#p_on[@]} -gt 0 ] && [ ${#p_off[@]} -gt 0 ] || continue
  awk -v name="$name" -v v="$cmp" -v on="$(printf '%s\n' "${p_on[@]}" | median)" -v off="$(printf '%s\n' "${p_off[@]}" | median)" 'BEGIN {
    printf "peak RSS %-13s off %6.1f MiB, %s %6.1f MiB, ratio %s/off %.2f%s\n", name, off/1024, v, on/1024, v, on/off,
      (name == "orchestrator") ? "" : " (target <= 1.25)" }'
done
