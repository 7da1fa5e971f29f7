#!/usr/bin/env bash
# Memory and latency while the collector is unreachable, under full load.
#
# Runs one `gymlens serve resources_servers --name arithmetic` with telemetry on
# (span groups SOAK_SPANS, default `all`: a SERVER and a gym.verify span per
# request, the most span pressure there is) exporting over OTLP/gRPC to a
# loopback port nobody listens on, and drives it with wrk (Debian's; 64
# connections, 2 threads, one /verify body) for SOAK_DURATION seconds.
# Every span the server makes is therefore either stuck in a failing export
# or dropped at the full queue. While the load runs, the server's VmRSS is
# read from /proc every second.
#
# Targets (a line each, "ok  " or "FAIL"):
#
#   RSS growth <= 64 MiB: the largest RSS seen after the warm-up, minus the
#     RSS at the end of the warm-up (SOAK_WARMUP s into the load, default 5,
#     at most half the run)
#   no request failed: wrk reports no non-2xx answer and no socket error
#     (its own timeout is 2 s, so a request held that long is an error)
#   no request blocked by export: wrk's slowest request < 1 s
#     (SOAK_MAX_LATENCY_MS). A request that waited on the exporter would wait
#     for its retries and timeout, which are seconds to tens of seconds
#   drops counted: the log reports spans dropped (dropped_total > 0)
#   drops reported per interval, not per span: lines "telemetry export queue
#     full: spans dropped" <= one per 5 s report interval of the server's
#     life plus one at shutdown (the interval is OTEL_BSP_SCHEDULE_DELAY,
#     5 s by default: lens/spanqueue.go)
#   the server exits cleanly within 40 s of SIGTERM
#
# Also printed: p99 latency, req/s, RSS before the load, at the warm-up, at
# the end and at its largest, spans dropped against requests served, export
# warnings and the server's log line count. Exits 0 only when every target
# was met. Every process it starts is stopped by PID on exit.
#
#   scripts/soak-export.sh                        # 60 s
#   SOAK_DURATION=300 scripts/soak-export.sh
#   SOAK_SPANS=default SOAK_WORK_US=100 scripts/soak-export.sh
#   SOAK_KEEP=1 scripts/soak-export.sh            # keep logs and samples
#
# Settings: SOAK_DURATION (s, 60), SOAK_WARMUP (s, 5), SOAK_SPANS (all),
# SOAK_WORK_US (0: the handler is as cheap as it gets, so the load is
# maximal), SOAK_CONNECTIONS (64), SOAK_THREADS (2), SOAK_RSS_LIMIT_MIB
# (64), SOAK_MAX_LATENCY_MS (1000), SOAK_KEEP (0).
#
# Needs go, python3 (a free port) and wrk (installed with apt-get when
# missing and possible).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${SOAK_DURATION:-60}
WARMUP=${SOAK_WARMUP:-5}
SPANS=${SOAK_SPANS:-all}
WORK_US=${SOAK_WORK_US:-0}
CONNECTIONS=${SOAK_CONNECTIONS:-64}
THREADS=${SOAK_THREADS:-2}
RSS_LIMIT_MIB=${SOAK_RSS_LIMIT_MIB:-64}
MAX_LATENCY_MS=${SOAK_MAX_LATENCY_MS:-1000}
KEEP=${SOAK_KEEP:-0}
READY_TIMEOUT=30   # s for the server to listen
EXIT_BOUND=40      # s after SIGTERM (flush 10 s + drain 10 s + slack)
REPORT_INTERVAL=5  # s between drop reports (OTEL_BSP_SCHEDULE_DELAY default, lens/spanqueue.go)
DROP_MSG='telemetry export queue full: spans dropped'

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-soak-export.XXXXXX")

SCRIPT_NAME=soak-export
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=lib/load.sh
source "$ROOT/scripts/lib/load.sh"
install_cleanup

# check COND MESSAGE: ok or FAIL for an arithmetic condition.
check() {
  if (($1)); then ok "$2"; else fail "$2"; fi
}

if ((DURATION < 2)); then
  fail "SOAK_DURATION must be at least 2 s, got $DURATION"
  exit 1
fi
((WARMUP > DURATION / 2)) && WARMUP=$((DURATION / 2))

set_clean_env

# ---- build and load generator ---------------------------------------------

t0=$(now_ns)
if ! (cd "$ROOT" && go build -o "$WORK/gymlens" ./cmd/gymlens); then
  fail "go build ./cmd/gymlens failed"
  exit 1
fi
info "gym built without -race in $(secs "$t0") s; $(nproc) CPUs shared by server and load generator"
if ! ensure_wrk "$WORK/apt.log"; then
  fail "wrk is not installed and could not be installed with apt-get (see $WORK/apt.log)"
  exit 1
fi
write_verify_lua "$WORK/verify.lua"

# ---- the server, exporting nowhere ----------------------------------------

port=$(free_ports 1)
if port_open "$port"; then
  fail "port $port was meant to be closed but something listens on it"
  exit 1
fi
ENDPOINT=http://127.0.0.1:$port
started=$(now_ns)
start_serve soak "$WORK" \
  NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=otlp NEMO_GYM_OTEL_SPAN_GROUPS="$SPANS" \
  OTEL_EXPORTER_OTLP_ENDPOINT="$ENDPOINT" OTEL_EXPORTER_OTLP_INSECURE=true OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
  -- --config-json "{\"work_us\":$WORK_US}" || exit 1
pid=$SERVE_PID addr=$SERVE_ADDR

# rss_kib: the server's resident set, in KiB (empty once it is gone).
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true; }

rss_idle=$(rss_kib)
info "server pid $pid on $addr: span groups '$SPANS', work_us $WORK_US, OTLP endpoint $ENDPOINT (closed port); RSS before load $((rss_idle / 1024)) MiB"
info "load: $(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }'), $CONNECTIONS connections, $THREADS threads, $DURATION s; RSS sampled every second, baseline at $WARMUP s"

# ---- load, sampling RSS ---------------------------------------------------

wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/verify.lua" "http://$addr/verify" >"$WORK/load.txt" 2>&1 &
wpid=$!
PIDS+=("$wpid")
load_start=$(now_ns)
: >"$WORK/rss.tsv"
next=1
while kill -0 "$wpid" 2>/dev/null; do
  # Sleep to the next whole second of the load, so samples do not drift.
  now=$(now_ns)
  wait_ns=$((load_start + next * 1000000000 - now))
  ((wait_ns > 0)) && sleep "$(awk -v n="$wait_ns" 'BEGIN { printf "%.3f", n / 1e9 }')"
  kill -0 "$wpid" 2>/dev/null || break
  r=$(rss_kib)
  [[ -n $r ]] && echo "$next $r" >>"$WORK/rss.tsv"
  next=$((next + 1))
done
wait "$wpid" || true
forget_pid "$wpid"

read_load "$WORK/load.txt"
if [[ -z $LOAD_RPS ]]; then
  fail "no Requests/sec in the wrk output"
  sed 's/^/       /' "$WORK/load.txt"
  exit 1
fi

# ---- shutdown -------------------------------------------------------------

stop_and_wait "$pid" "$EXIT_BOUND"
code=$STOP_CODE
((code == 124)) && code=killed
shut=$STOP_SECS
lifetime=$(secs "$started")

# ---- figures --------------------------------------------------------------

samples=$(wc -l <"$WORK/rss.tsv")
rss_base=$(awk -v w="$WARMUP" '$1 >= w { print $2; exit }' "$WORK/rss.tsv")
rss_end=$(awk 'END { print $2 }' "$WORK/rss.tsv")
rss_max=$(awk -v w="$WARMUP" '$1 >= w && $2 > m { m = $2 } END { print m + 0 }' "$WORK/rss.tsv")
rss_max_at=$(awk -v w="$WARMUP" '$1 >= w && $2 > m { m = $2; t = $1 } END { print t + 0 }' "$WORK/rss.tsv")
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

drop_lines=$(grep -c "$DROP_MSG" "$WORK/serve.err" || true)
dropped=$(grep "$DROP_MSG" "$WORK/serve.err" | grep -o 'dropped_total=[0-9]*' | tail -n 1 | cut -d= -f2 || true)
dropped=${dropped:-0}
export_warnings=$(grep -c 'telemetry export error' "$WORK/serve.err" || true)
log_lines=$(wc -l <"$WORK/serve.err")
intervals=$(awk -v l="$lifetime" -v i="$REPORT_INTERVAL" 'BEGIN { print int(l / i) }')
allowed=$((intervals + 1))

info "$(printf 'load: %.1f req/s, %s requests in %s s; p50 %s ms, p99 %s ms, slowest %s ms' \
  "$LOAD_RPS" "${LOAD_TOTAL:-?}" "$DURATION" "${LOAD_P50_MS:-?}" "${LOAD_P99_MS:-?}" "${LOAD_MAX_MS:-?}")"
info "RSS: $(mib "$rss_idle") MiB before load, $(mib "${rss_base:-0}") MiB at ${WARMUP} s, $(mib "$rss_end") MiB at the end, largest $(mib "$rss_max") MiB at ${rss_max_at} s ($samples samples)"
info "spans dropped $dropped over ${LOAD_TOTAL:-?} requests served; $drop_lines drop reports in a ${lifetime} s life ($intervals intervals of ${REPORT_INTERVAL} s + shutdown); export warnings $export_warnings; server log lines $log_lines"

if [[ -z $rss_base ]]; then
  fail "RSS growth: no sample at or after ${WARMUP} s"
else
  growth=$((rss_max - rss_base))
  check "growth <= RSS_LIMIT_MIB * 1024" "RSS growth after warm-up $(mib "$growth") MiB (target <= $RSS_LIMIT_MIB MiB)"
fi
check "LOAD_NON2XX == 0 && LOAD_SOCKERR == 0" "requests failed: non-2xx $LOAD_NON2XX, socket errors $LOAD_SOCKERR (must be 0)"
if [[ -z $LOAD_MAX_MS ]]; then
  fail "no request blocked by export: wrk printed no latency"
else
  slow=$(awk -v m="$LOAD_MAX_MS" -v t="$MAX_LATENCY_MS" 'BEGIN { print (m < t) ? 1 : 0 }')
  check "slow == 1" "no request blocked by export: slowest request $LOAD_MAX_MS ms, p99 ${LOAD_P99_MS:-?} ms (target: slowest < $MAX_LATENCY_MS ms)"
fi
check "dropped > 0 && drop_lines >= 1" "dropped spans counted and logged: dropped_total $dropped in $drop_lines log lines (want > 0: the queue must have filled)"
check "drop_lines <= allowed" "drop reports once per interval: $drop_lines lines (target <= $allowed: $intervals intervals + shutdown), for $dropped spans"
if [[ $code == 0 ]]; then
  ok "server exited 0, $shut s after SIGTERM (bound ${EXIT_BOUND} s)"
else
  fail "server exit after SIGTERM: $code after $shut s (bound ${EXIT_BOUND} s)"
  tail -n 10 "$WORK/serve.err" | sed 's/^/       /'
fi

echo "soak-export: $failed failed"
[[ $failed == 0 ]]
