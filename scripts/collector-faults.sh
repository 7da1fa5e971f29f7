#!/usr/bin/env bash
# Collector faults, measured: `gymlens serve resources_servers --name arithmetic`
# exporting over OTLP/gRPC to a collector that is
#
#   up        a real receiver (Jaeger v2 from tools/bin/jaeger, configured by
#             tools/jaeger/config.yaml; skipped when the binary is missing)
#   down      a closed loopback port (connections refused)
#   blackhole a listener that accepts connections and never reads or answers
#   http500   an OTLP/HTTP endpoint answering every export with 500
#   http429   an OTLP/HTTP endpoint answering every export with 429
#
# Each variant runs the same load from a load generator that is not this
# project's code - wrk, POSTing one /verify body over 16 connections for 5 s -
# in alternating order over 2 rounds (up down blackhole, then the reverse),
# each run on a fresh server process. Prints one line per measurement with
# its figure:
#
#   req/s per run and per variant (mean), ratios down/up and blackhole/up
#   (target >= 0.9), non-2xx answers and socket errors from wrk (must be 0),
#   export warnings ("telemetry export error") per process in any 30 s
#   window (target <= 1), spans dropped, the spans the server's own account
#   says it lost (its "telemetry lost spans" line at shutdown; with a
#   collector at fault it must be every span it ended), and the time from
#   SIGTERM to exit.
#
# Lines start with "ok  " or "FAIL" when they carry a target, "    " when
# they are figures only. Exits 0 only when every target was met. Every
# process it starts is stopped by PID on exit, also on failure or Ctrl-C.
#
#   scripts/collector-faults.sh
#   CF_DURATION=10 CF_ROUNDS=3 scripts/collector-faults.sh
#   CF_KEEP=1 scripts/collector-faults.sh   # keep logs and wrk output
#
# Needs go, python3 (free ports, the blackhole listener, window counting)
# and wrk (installed with apt-get when missing and possible; otherwise a
# small Go load loop written to the work directory stands in, and the
# output says so).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JAEGER=$ROOT/tools/bin/jaeger
JAEGER_CONFIG=$ROOT/tools/jaeger/config.yaml
DURATION=${CF_DURATION:-5}   # s of load per run
CONNECTIONS=${CF_CONNECTIONS:-16}
THREADS=${CF_THREADS:-2}
ROUNDS=${CF_ROUNDS:-2}
KEEP=${CF_KEEP:-0}
READY_TIMEOUT=30 # s for a process to listen
EXIT_BOUND=40    # s after SIGTERM before a server is killed (flush 10 s + drain 10 s + slack)
TARGET_RATIO=0.9

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-collector-faults.XXXXXX")

SCRIPT_NAME=collector-faults
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=lib/load.sh
source "$ROOT/scripts/lib/load.sh"
install_cleanup


# Only this script's telemetry settings reach the server.
set_clean_env

command -v python3 >/dev/null || {
  fail "python3 not found (free ports, blackhole listener)"
  exit 1
}

# ---- build ----------------------------------------------------------------

t0=$(now_ns)
if ! (cd "$ROOT" && go build -o "$WORK/gymlens" ./cmd/gymlens); then
  fail "go build ./cmd/gymlens failed"
  exit 1
fi
info "gym built without -race in $(secs "$t0") s; $(nproc) CPUs shared by server, load generator and collector"

# ---- load generator -------------------------------------------------------

BODY=$VERIFY_BODY
LOADGEN=()
if ensure_wrk "$WORK/apt.log"; then
  cat >"$WORK/verify.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '$BODY'
EOF
  LOADGEN=(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" -s "$WORK/verify.lua")
  info "load: $(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }'), $CONNECTIONS connections, $THREADS threads, ${DURATION} s per run, $ROUNDS rounds"
else
  # Fallback: a plain Go loop, std library only, built outside the module.
  # It prints the two wrk lines the parser below reads.
  mkdir -p "$WORK/loadgen"
  cat >"$WORK/loadgen/main.go" <<'EOF'
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	conns := flag.Int("c", 16, "connections")
	dur := flag.Duration("d", 5*time.Second, "duration")
	body := flag.String("body", "", "request body")
	flag.Parse()
	url := flag.Arg(0)
	tr := &http.Transport{MaxIdleConnsPerHost: *conns, Proxy: nil}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var ok, non2xx, errs atomic.Int64
	end := time.Now().Add(*dur)
	start := time.Now()
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				res, err := client.Post(url, "application/json", strings.NewReader(*body))
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode/100 == 2 {
					ok.Add(1)
				} else {
					non2xx.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	n := ok.Load() + non2xx.Load()
	fmt.Printf("  %d requests in %.2fs\n", n, el)
	if non2xx.Load() > 0 {
		fmt.Printf("  Non-2xx or 3xx responses: %d\n", non2xx.Load())
	}
	if errs.Load() > 0 {
		fmt.Printf("  Socket errors: connect 0, read %d, write 0, timeout 0\n", errs.Load())
	}
	fmt.Printf("Requests/sec: %.2f\n", float64(n)/el)
}
EOF
  if ! (cd "$WORK/loadgen" && GOWORK=off GOFLAGS= go build -o "$WORK/loadgen/load" main.go); then
    fail "wrk is not installed and the Go fallback load loop did not build"
    exit 1
  fi
  LOADGEN=("$WORK/loadgen/load" -c "$CONNECTIONS" -d "${DURATION}s" -body "$BODY")
  info "load: wrk NOT available (apt-get failed, see $WORK/apt.log); FALLBACK Go load loop in $WORK/loadgen, $CONNECTIONS connections, ${DURATION} s per run, $ROUNDS rounds"
fi

# ---- collectors -----------------------------------------------------------

declare -A ENDPOINT
VARIANTS=()

# up: Jaeger on free loopback ports, OTLP over gRPC.
if [[ -x $JAEGER ]]; then
  jready=0
  for attempt in 1 2 3; do
    read -r p_grpc p_http p_query p_qgrpc <<<"$(free_ports 4)"
    JAEGER_OTLP_GRPC=127.0.0.1:$p_grpc JAEGER_OTLP_HTTP=127.0.0.1:$p_http \
      JAEGER_QUERY_HTTP=127.0.0.1:$p_query JAEGER_QUERY_GRPC=127.0.0.1:$p_qgrpc JAEGER_LOG_LEVEL=warn \
      env ${clean_env[@]+"${clean_env[@]}"} "$JAEGER" --config "$JAEGER_CONFIG" >"$WORK/jaeger.log" 2>&1 &
    jpid=$!
    PIDS+=("$jpid")
    for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
      kill -0 "$jpid" 2>/dev/null || break
      if port_open "$p_grpc" && port_open "$p_query"; then
        jready=1
        break
      fi
      sleep 0.1
    done
    ((jready == 1)) && break
    stop_pid "$jpid"
    echo "collector-faults: jaeger did not start (attempt $attempt)" >&2
  done
  if ((jready == 1)); then
    ENDPOINT[up]=http://127.0.0.1:$p_grpc
    VARIANTS+=(up)
    info "up: jaeger pid $jpid, OTLP gRPC on 127.0.0.1:$p_grpc"
  else
    fail "up: jaeger did not come up; the 'up' variant is skipped"
    tail -n 5 "$WORK/jaeger.log" | sed 's/^/       /'
  fi
else
  info "up: SKIPPED - no Jaeger binary at $JAEGER (scripts/e2e.sh builds it); no ratios without it"
fi

# down: a port nobody listens on.
ENDPOINT[down]=http://127.0.0.1:$(free_ports 1)
VARIANTS+=(down)
info "down: OTLP endpoint ${ENDPOINT[down]} (closed port)"

# blackhole: accept, hold the connection, never read or write.
python3 -u -c '
import socket
ln = socket.socket()
ln.bind(("127.0.0.1", 0))
ln.listen(128)
print(ln.getsockname()[1], flush=True)
held = []
while True:
    conn, _ = ln.accept()
    held.append(conn)
' >"$WORK/blackhole.port" 2>"$WORK/blackhole.log" &
bpid=$!
PIDS+=("$bpid")
for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
  [[ -s $WORK/blackhole.port ]] && break
  sleep 0.1
done
bport=$(head -n 1 "$WORK/blackhole.port" 2>/dev/null || true)
if [[ -z $bport ]]; then
  fail "blackhole listener did not start"
  exit 1
fi
ENDPOINT[blackhole]=http://127.0.0.1:$bport
VARIANTS+=(blackhole)
info "blackhole: OTLP endpoint ${ENDPOINT[blackhole]} (python3 pid $bpid accepts and never answers)"

# http500, http429: OTLP/HTTP endpoints refusing every export.
declare -A PROTOCOL
for status in 500 429; do
  python3 -u -c '
import http.server, sys
status = int(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
' "$status" >"$WORK/http$status.port" 2>"$WORK/http$status.log" &
  hpid=$!
  PIDS+=("$hpid")
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    [[ -s $WORK/http$status.port ]] && break
    sleep 0.1
  done
  hport=$(head -n 1 "$WORK/http$status.port" 2>/dev/null || true)
  if [[ -z $hport ]]; then
    fail "http$status endpoint did not start"
    exit 1
  fi
  ENDPOINT[http$status]=http://127.0.0.1:$hport
  PROTOCOL[http$status]=http/protobuf
  VARIANTS+=("http$status")
  info "http$status: OTLP/HTTP endpoint ${ENDPOINT[http$status]} (python3 pid $hpid answers $status)"
done

# ---- one run --------------------------------------------------------------

declare -A RPS_SUM RUNS SHUTDOWNS
NON2XX_TOTAL=0
SOCKERR_TOTAL=0
MAX_WINDOW=0

# max_in_window FILE: the most export warnings in any 30 s window, from the
# time= field of the server's log lines.
max_in_window() {
  python3 - "$1" <<'EOF'
import re, sys
from datetime import datetime
ts = []
for line in open(sys.argv[1], errors="replace"):
    if "telemetry export error" not in line:
        continue
    m = re.search(r"time=(\S+)", line)
    if m:
        ts.append(datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp())
ts.sort()
best, j = 0, 0
for i, t in enumerate(ts):
    while ts[j] <= t - 30:
        j += 1
    best = max(best, i - j + 1)
print(best)
EOF
}

run_variant() {
  local variant=$1 round=$2 dir=$WORK/$1-$2
  mkdir -p "$dir"
  local started i
  started=$(now_ns)
  start_serve "$variant round $round" "$dir" \
    NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=otlp NEMO_GYM_OTEL_SPAN_GROUPS=all \
    OTEL_EXPORTER_OTLP_ENDPOINT="${ENDPOINT[$variant]}" OTEL_EXPORTER_OTLP_INSECURE=true \
    OTEL_EXPORTER_OTLP_PROTOCOL="${PROTOCOL[$variant]:-grpc}" \
    OTEL_METRIC_EXPORT_INTERVAL=500 || return 0
  local pid=$SERVE_PID addr=$SERVE_ADDR

  "${LOADGEN[@]}" "http://$addr/verify" >"$dir/load.txt" 2>&1 || true
  local rps non2xx sockerr total
  read_load "$dir/load.txt"
  rps=$LOAD_RPS total=$LOAD_TOTAL non2xx=$LOAD_NON2XX sockerr=$LOAD_SOCKERR
  if [[ -z $rps ]]; then
    fail "$variant round $round: no Requests/sec in the load output"
    sed 's/^/       /' "$dir/load.txt"
    stop_pid "$pid"
    return
  fi

  local code shut lifetime
  stop_and_wait "$pid" "$EXIT_BOUND"
  if ((STOP_CODE == 124)); then
    fail "$variant round $round: still running ${EXIT_BOUND} s after SIGTERM; killed"
    return
  fi
  code=$STOP_CODE shut=$STOP_SECS
  lifetime=$(secs "$started")

  local warnings window dropped flush
  warnings=$(grep -c 'telemetry export error' "$dir/serve.err" || true)
  window=$(max_in_window "$dir/serve.err")
  flush=$(grep -c 'msg="telemetry flush"' "$dir/serve.err" || true)
  dropped=$(grep -o 'dropped_total=[0-9]*' "$dir/serve.err" | tail -n 1 | cut -d= -f2 || true)
  local lostline lost of
  lostline=$(grep 'msg="telemetry lost spans"' "$dir/serve.err" | tail -n 1 || true)
  lost=$(grep -o ' lost=[0-9]*' <<<"$lostline" | cut -d= -f2 || true)
  of=$(grep -o ' of=[0-9]*' <<<"$lostline" | cut -d= -f2 || true)

  info "$(printf '%-9s round %d: %9.1f req/s (%s requests in %s s), non-2xx %s, socket errors %s, export warnings %s in %s s (max %s per 30 s), spans dropped %s, spans lost %s of %s, flush warnings %s, SIGTERM->exit %s s (code %s)' \
    "$variant" "$round" "$rps" "${total:-?}" "$DURATION" "$non2xx" "$sockerr" "$warnings" "$lifetime" "$window" "${dropped:-0}" "${lost:-0}" "${of:-?}" "$flush" "$shut" "$code")"
  if [[ $variant != up ]]; then
    if [[ -n $lost && $lost == "$of" && $lost != 0 ]]; then
      ok "$variant round $round: every one of the $of spans ended counted as lost"
    else
      fail "$variant round $round: the server accounted for ${lost:-no} lost spans of ${of:-?} ended; with the collector at fault all are lost"
    fi
  fi

  RPS_SUM[$variant]=$(awk -v a="${RPS_SUM[$variant]:-0}" -v b="$rps" 'BEGIN { print a + b }')
  RUNS[$variant]=$((${RUNS[$variant]:-0} + 1))
  SHUTDOWNS[$variant]="${SHUTDOWNS[$variant]:+${SHUTDOWNS[$variant]} }${shut}s"
  NON2XX_TOTAL=$((NON2XX_TOTAL + non2xx))
  SOCKERR_TOTAL=$((SOCKERR_TOTAL + sockerr))
  ((window > MAX_WINDOW)) && MAX_WINDOW=$window
  if [[ $code != 0 ]]; then
    fail "$variant round $round: gymlens serve exited $code after SIGTERM"
    tail -n 10 "$dir/serve.err" | sed 's/^/       /'
  fi
  return 0
}

# ---- the runs -------------------------------------------------------------

alternate_rounds "$ROUNDS" run_variant "${VARIANTS[@]}"

# ---- figures --------------------------------------------------------------

declare -A MEAN
for v in "${VARIANTS[@]}"; do
  if [[ -n ${RUNS[$v]:-} ]]; then
    MEAN[$v]=$(awk -v s="${RPS_SUM[$v]}" -v n="${RUNS[$v]}" 'BEGIN { printf "%.1f", s / n }')
    info "$(printf '%-9s mean %9.1f req/s over %d runs; SIGTERM->exit %s' "$v" "${MEAN[$v]}" "${RUNS[$v]}" "${SHUTDOWNS[$v]}")"
  fi
done

if [[ -n ${MEAN[up]:-} ]]; then
  for v in down blackhole http500 http429; do
    [[ -n ${MEAN[$v]:-} ]] || continue
    ratio=$(awk -v a="${MEAN[$v]}" -v b="${MEAN[up]}" 'BEGIN { printf "%.3f", a / b }')
    if awk -v r="$ratio" -v t="$TARGET_RATIO" 'BEGIN { exit !(r >= t) }'; then
      ok "throughput ratio $v/up = $ratio (target >= $TARGET_RATIO)"
    else
      fail "throughput ratio $v/up = $ratio (target >= $TARGET_RATIO)"
    fi
  done
else
  info "throughput ratios: not measured (no 'up' variant)"
fi

if ((NON2XX_TOTAL == 0 && SOCKERR_TOTAL == 0)); then
  ok "non-2xx answers 0, socket errors 0 over every run (must be 0)"
else
  fail "non-2xx answers $NON2XX_TOTAL, socket errors $SOCKERR_TOTAL over every run (must be 0)"
fi
if ((MAX_WINDOW <= 1)); then
  ok "export warnings: at most $MAX_WINDOW per process in any 30 s window (target <= 1)"
else
  fail "export warnings: $MAX_WINDOW per process in one 30 s window (target <= 1)"
fi

echo "collector-faults: $failed failed"
[[ $failed == 0 ]]
