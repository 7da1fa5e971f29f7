#!/usr/bin/env bash
# What the HTTP instrumentation costs a real server under load.
#
# Runs `gymlens serve resources_servers --name arithmetic` with
# config {"work_us": N} (each /verify first burns about N µs of CPU, default
# 100, so the handler costs what a small real verifier costs) in five
# variants:
#
#   uninstrumented  GYMLENS_BENCH_UNINSTRUMENTED=1, telemetry off: our stack
#                   with no ingress instrumentation installed (the
#                   baseline; gym is built with -tags gymbench, the only
#                   build that reads the variable)
#   off             NEMO_GYM_OTEL_ENABLED=0
#   metrics         enabled, NEMO_GYM_OTEL_TRACES_ENABLED=0 (metrics only)
#   default         enabled, the default span-group preset
#   all             enabled, NEMO_GYM_OTEL_SPAN_GROUPS=all
#
# Every variant exports over OTLP/gRPC to tools/otlpsink, a local receiver
# that counts and discards (the uninstrumented and off variants are pointed
# at it too and must send nothing). Load comes from a generator that is not
# this project's code: Debian's wrk with a Lua script, 64 connections, 2
# threads, POSTing one /verify body with a sampled `traceparent` header (the
# same one on every request: a resources server in a fleet always gets one,
# so the propagation path is measured; set BH_TRACEPARENT=0 to send none and
# have the server start root spans instead).
#
# Each run gets a fresh server and sink: BH_WARMUP seconds of unmeasured
# load, then BH_DURATION seconds measured with `wrk --latency`. Variants run
# in alternating order over BH_ROUNDS rounds (forward, then reversed) so
# drift hits them alike. Per run it prints req/s, p50 and p99 latency (from
# wrk), CPU per request and allocations per request (from the server's own
# counters, see below), and what the sink received; then per variant the
# medians and the req/s ratio to uninstrumented against its target:
#
#   off >= 0.97, default >= 0.90, all >= 0.85 (metrics: figure only)
#
# plus a sanity check of what was exported (uninstrumented and off: nothing;
# metrics: metric points and no spans; default and all: spans) and of what
# was dropped (nothing: with the receiver up, a variant that sheds spans at
# its full queue would look cheaper than it is).
#
# CPU and allocations per request: the server runs with GYM_RUNSTATS_DIR
# set, and the script sends it SIGUSR1 right before and right after the
# measured window; each signal appends a line of cumulative counters
# (getrusage user+system CPU time, runtime/metrics heap allocation count).
# The differences, divided by the requests wrk completed, are the figures.
# They cover the whole process: handlers, export, metric collection, GC.
#
# Lines start with "ok  " or "FAIL" when they carry a target, "    " when
# they are figures only. Exits 0 only when every target and check was met.
# Every process it starts is stopped by PID on exit, also on failure or
# Ctrl-C.
#
#   scripts/bench-http.sh                               # 3 rounds of 10 s
#   BH_SMOKE=1 BH_DURATION=1 BH_WARMUP=1 BH_ROUNDS=1 scripts/bench-http.sh   # smoke run (CI)
#   BH_VARIANTS="uninstrumented default" scripts/bench-http.sh
#   BH_KEEP=1 scripts/bench-http.sh      # keep logs, wrk output, counters
#
# Settings: BH_DURATION (s, 10), BH_WARMUP (s, 2; 0 for none), BH_ROUNDS
# (3), BH_CONNECTIONS (64), BH_THREADS (2), BH_WORK_US (100),
# BH_TRACEPARENT (1), BH_VARIANTS (all five), BH_KEEP (0), BH_SMOKE (0).
#
# Needs go, python3 and wrk (installed with apt-get when missing and
# possible).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${BH_DURATION:-10}
WARMUP=${BH_WARMUP:-2}
ROUNDS=${BH_ROUNDS:-3}
CONNECTIONS=${BH_CONNECTIONS:-64}
THREADS=${BH_THREADS:-2}
WORK_US=${BH_WORK_US:-100}
TRACEPARENT=${BH_TRACEPARENT:-1}
read -r -a VARIANTS <<<"${BH_VARIANTS:-uninstrumented off metrics default all}"
KEEP=${BH_KEEP:-0}
READY_TIMEOUT=30 # s for a process to listen
EXIT_BOUND=40    # s after SIGTERM before a server is killed (flush 10 s + drain 10 s + slack)

declare -A TARGET=([off]=0.97 [default]=0.90 [all]=0.85)
# BH_SMOKE=1: a run too short to mean anything (CI uses it to prove the
# script still works end to end). The ratios and drop counts are printed
# but not judged; every other check still is.
SMOKE=${BH_SMOKE:-0}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-bench-http.XXXXXX")

SCRIPT_NAME=bench-http
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=lib/load.sh
source "$ROOT/scripts/lib/load.sh"
install_cleanup


for v in "${VARIANTS[@]}"; do
  case $v in uninstrumented | off | metrics | default | all) ;; *)
    fail "unknown variant '$v' in BH_VARIANTS (known: uninstrumented off metrics default all)"
    exit 1
    ;;
  esac
done

# Only this script's telemetry settings reach the server.
set_clean_env

# ---- build ----------------------------------------------------------------

t0=$(now_ns)
# The gymbench tag adds one thing: server.New reads
# GYMLENS_BENCH_UNINSTRUMENTED (the baseline). Every variant runs this binary.
if ! (cd "$ROOT" && go build -tags gymbench -o "$WORK/gymlens" ./cmd/gymlens); then
  fail "go build -tags gymbench ./cmd/gymlens failed"
  exit 1
fi
if ! (cd "$ROOT/tools" && go build -o "$WORK/otlpsink" ./otlpsink); then
  fail "go build ./otlpsink in tools/ failed"
  exit 1
fi
info "gym and otlpsink built without -race in $(secs "$t0") s; $(nproc) CPUs shared by server, sink and load generator"

# ---- load generator -------------------------------------------------------

if ! ensure_wrk "$WORK/apt.log"; then
  fail "wrk is not installed and could not be installed with apt-get (see $WORK/apt.log)"
  exit 1
fi
BODY=$VERIFY_BODY
{
  echo 'wrk.method = "POST"'
  echo 'wrk.headers["Content-Type"] = "application/json"'
  if [[ $TRACEPARENT == 1 ]]; then
    echo 'wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"'
  fi
  echo "wrk.body = '$BODY'"
} >"$WORK/verify.lua"
info "load: $(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }'), $CONNECTIONS connections, $THREADS threads, ${WARMUP} s warm-up + ${DURATION} s measured per run, $ROUNDS rounds; traceparent $([[ $TRACEPARENT == 1 ]] && echo "sent (sampled)" || echo "not sent")"
info "server: gymlens serve resources_servers --name arithmetic --config-json '{\"work_us\":$WORK_US}'"

# ---- helpers --------------------------------------------------------------

# stat_field FILE LINE KEY: the value of KEY on line LINE of a .runstats file.
stat_field() {
  awk -v n="$2" -v key="$3" 'NR == n { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] } }' "$1"
}

# snapshot PID FILE N: asks process PID for its counters and waits until
# FILE has N lines.
snapshot() {
  local i lines
  kill -USR1 "$1"
  for ((i = 0; i < 200; i++)); do
    lines=$(wc -l <"$2" 2>/dev/null || echo 0)
    ((lines >= $3)) && return 0
    sleep 0.05
  done
  return 1
}

# ---- one run --------------------------------------------------------------

declare -A R_RPS R_P50 R_P99 R_CPU R_ALLOCS R_SPANS R_POINTS R_SPR R_DROPPED

run_variant() {
  local variant=$1 round=$2 dir=$WORK/$1-$2
  mkdir -p "$dir"

  # The sink.
  local spid saddr="" i
  "$WORK/otlpsink" -addr 127.0.0.1:0 >"$dir/sink.out" 2>"$dir/sink.err" &
  spid=$!
  PIDS+=("$spid")
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    [[ -f $dir/sink.out ]] && saddr=$(sed -n 's/^OTLPSINK_READY //p' "$dir/sink.out" | head -n 1)
    [[ -n $saddr ]] && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $saddr ]]; then
    fail "$variant round $round: otlpsink did not get ready"
    sed 's/^/       /' "$dir/sink.err"
    stop_pid "$spid"
    return 0
  fi

  # The server.
  local venv=()
  case $variant in
    uninstrumented) venv=(NEMO_GYM_OTEL_ENABLED=0 GYMLENS_BENCH_UNINSTRUMENTED=1) ;;
    off) venv=(NEMO_GYM_OTEL_ENABLED=0) ;;
    metrics) venv=(NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_TRACES_ENABLED=0) ;;
    default) venv=(NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_SPAN_GROUPS=default) ;;
    all) venv=(NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_SPAN_GROUPS=all) ;;
  esac
  if ! start_serve "$variant round $round" "$dir" "${venv[@]}" NEMO_GYM_OTEL_EXPORTER=otlp \
    OTEL_EXPORTER_OTLP_ENDPOINT="http://$saddr" OTEL_EXPORTER_OTLP_INSECURE=true OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
    GYM_RUNSTATS_DIR="$dir" -- --config-json "{\"work_us\":$WORK_US}"; then
    stop_pid "$spid"
    return 0
  fi
  local pid=$SERVE_PID addr=$SERVE_ADDR

  local warm_total=0
  if ((WARMUP > 0)); then
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" -s "$WORK/verify.lua" "http://$addr/verify" >"$dir/warmup.txt" 2>&1 || true
    read_load "$dir/warmup.txt"
    warm_total=${LOAD_TOTAL:-0}
  fi
  local stats=$dir/arithmetic.runstats
  if ! snapshot "$pid" "$stats" 1; then
    fail "$variant round $round: no run-stats line after SIGUSR1"
    stop_pid "$pid"
    stop_pid "$spid"
    return 0
  fi
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/verify.lua" "http://$addr/verify" >"$dir/load.txt" 2>&1 || true
  snapshot "$pid" "$stats" 2 || true
  read_load "$dir/load.txt"

  local shut code scode
  stop_and_wait "$pid" "$EXIT_BOUND"
  shut=$STOP_SECS code=$STOP_CODE
  stop_and_wait "$spid" "$EXIT_BOUND"
  scode=$STOP_CODE

  if [[ -z $LOAD_RPS || -z $LOAD_TOTAL || $LOAD_TOTAL == 0 ]]; then
    fail "$variant round $round: no requests counted in the wrk output"
    sed 's/^/       /' "$dir/load.txt"
    return 0
  fi
  if [[ $(wc -l <"$stats") -lt 2 ]]; then
    fail "$variant round $round: the run-stats line after the load is missing"
    return 0
  fi
  local cpu mallocs cpu_req allocs_req
  cpu=$(($(stat_field "$stats" 2 user_us) + $(stat_field "$stats" 2 sys_us) - $(stat_field "$stats" 1 user_us) - $(stat_field "$stats" 1 sys_us)))
  mallocs=$(($(stat_field "$stats" 2 mallocs) - $(stat_field "$stats" 1 mallocs)))
  cpu_req=$(awk -v c="$cpu" -v n="$LOAD_TOTAL" 'BEGIN { printf "%.1f", c / n }')
  allocs_req=$(awk -v a="$mallocs" -v n="$LOAD_TOTAL" 'BEGIN { printf "%.1f", a / n }')

  local spans points dropped spr
  spans=$(sed -n 's/^otlpsink: .*spans=\([0-9]*\).*/\1/p' "$dir/sink.out" | tail -n 1)
  points=$(sed -n 's/^otlpsink: .*metric_points=\([0-9]*\).*/\1/p' "$dir/sink.out" | tail -n 1)
  dropped=$(grep -o 'dropped_total=[0-9]*' "$dir/serve.err" | tail -n 1 | cut -d= -f2 || true)
  spr=$(awk -v s="${spans:-0}" -v n=$((warm_total + LOAD_TOTAL)) 'BEGIN { printf "%.2f", s / n }')

  info "$(printf '%-14s round %d: %9.1f req/s, p50 %7.3f ms, p99 %7.3f ms, CPU %6.1f us/req, %6.1f allocs/req; sink got %s spans (%s per request served), %s metric points; dropped %s; non-2xx %s, socket errors %s; SIGTERM->exit %s s' \
    "$variant" "$round" "$LOAD_RPS" "${LOAD_P50_MS:-0}" "${LOAD_P99_MS:-0}" "$cpu_req" "$allocs_req" "${spans:-?}" "$spr" "${points:-?}" "${dropped:-0}" "$LOAD_NON2XX" "$LOAD_SOCKERR" "$shut")"

  if [[ $code != 0 ]]; then
    fail "$variant round $round: gymlens serve exited $code after SIGTERM"
    tail -n 10 "$dir/serve.err" | sed 's/^/       /'
  fi
  if [[ $scode != 0 || -z $spans ]]; then
    fail "$variant round $round: otlpsink exited $scode without its counts"
  fi
  if ((LOAD_NON2XX != 0 || LOAD_SOCKERR != 0)); then
    fail "$variant round $round: non-2xx $LOAD_NON2XX, socket errors $LOAD_SOCKERR (must be 0)"
  fi
  R_RPS[$variant]+="$LOAD_RPS "
  R_P50[$variant]+="${LOAD_P50_MS:-0} "
  R_P99[$variant]+="${LOAD_P99_MS:-0} "
  R_CPU[$variant]+="$cpu_req "
  R_ALLOCS[$variant]+="$allocs_req "
  R_SPANS[$variant]+="${spans:-0} "
  R_POINTS[$variant]+="${points:-0} "
  R_SPR[$variant]+="$spr "
  R_DROPPED[$variant]+="${dropped:-0} "
  return 0
}

# ---- the runs -------------------------------------------------------------

alternate_rounds "$ROUNDS" run_variant "${VARIANTS[@]}"

# ---- figures --------------------------------------------------------------

med() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | median; }

echo
info "$(printf '%-14s %10s %9s %9s %11s %11s %7s   (medians of %d rounds)' variant 'req/s' 'p50 ms' 'p99 ms' 'CPU us/req' 'allocs/req' ratio "$ROUNDS")"
declare -A MED
for v in "${VARIANTS[@]}"; do
  [[ -n ${R_RPS[$v]:-} ]] || continue
  MED[$v]=$(med "${R_RPS[$v]}")
done
for v in "${VARIANTS[@]}"; do
  [[ -n ${R_RPS[$v]:-} ]] || continue
  ratio=""
  [[ -n ${MED[uninstrumented]:-} ]] && ratio=$(awk -v a="${MED[$v]}" -v b="${MED[uninstrumented]}" 'BEGIN { printf "%.3f", a / b }')
  info "$(printf '%-14s %10.1f %9.3f %9.3f %11.1f %11.1f %7s' "$v" "${MED[$v]}" "$(med "${R_P50[$v]}")" "$(med "${R_P99[$v]}")" \
    "$(med "${R_CPU[$v]}")" "$(med "${R_ALLOCS[$v]}")" "${ratio:--}")"
done
echo

if [[ -n ${MED[uninstrumented]:-} ]]; then
  for v in off metrics default all; do
    [[ -n ${MED[$v]:-} ]] || continue
    ratio=$(awk -v a="${MED[$v]}" -v b="${MED[uninstrumented]}" 'BEGIN { printf "%.3f", a / b }')
    if [[ -z ${TARGET[$v]:-} ]]; then
      info "req/s $v/uninstrumented = $ratio (no target)"
    elif ((SMOKE == 1)); then
      info "req/s $v/uninstrumented = $ratio (target >= ${TARGET[$v]}; not judged in a smoke run)"
    elif awk -v r="$ratio" -v t="${TARGET[$v]}" 'BEGIN { exit !(r >= t) }'; then
      ok "req/s $v/uninstrumented = $ratio (target >= ${TARGET[$v]})"
    else
      fail "req/s $v/uninstrumented = $ratio (target >= ${TARGET[$v]})"
    fi
  done
else
  info "ratios: not computed (no uninstrumented run)"
fi

# What reached the sink, per run: nothing from uninstrumented and off, metric
# points but no spans from metrics, spans from default and all.
for v in "${VARIANTS[@]}"; do
  [[ -n ${R_SPANS[$v]:-} ]] || continue
  spans=${R_SPANS[$v]% } points=${R_POINTS[$v]% }
  maxs=$(tr ' ' '\n' <<<"$spans" | sort -g | tail -n 1)
  mins=$(tr ' ' '\n' <<<"$spans" | sort -g | head -n 1)
  maxp=$(tr ' ' '\n' <<<"$points" | sort -g | tail -n 1)
  minp=$(tr ' ' '\n' <<<"$points" | sort -g | head -n 1)
  case $v in
    uninstrumented | off) want="no spans, no metric points"; good=$((maxs == 0 && maxp == 0)) ;;
    metrics) want="metric points, no spans"; good=$((maxs == 0 && minp > 0)) ;;
    default | all) want="spans"; good=$((mins > 0)) ;;
  esac
  msg="$v: sink received spans [$spans], metric points [$points] per run; spans per request served [${R_SPR[$v]% }] (want $want)"
  if ((good == 1)); then ok "$msg"; else fail "$msg"; fi
  # A variant that sheds spans at its queue exports less than it was asked
  # to, so its req/s flatters it.
  case $v in default | all)
    dropped=$(tr ' ' '\n' <<<"${R_DROPPED[$v]% }" | awk '{ s += $1 } END { print s + 0 }')
    msg="$v: spans dropped with the receiver up [${R_DROPPED[$v]% }] per run (must be 0, else the ratio understates the cost of exporting)"
    if ((dropped == 0)); then
      ok "$msg"
    elif ((SMOKE == 1)); then
      info "$msg; not judged in a smoke run"
    else
      fail "$msg"
    fi
    ;;
  esac
done

echo "bench-http: $failed failed"
[[ $failed == 0 ]]
