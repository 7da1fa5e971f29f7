#!/usr/bin/env bash
# One verify load, two implementations of the same environment: gymlens's
# Go string_match (`gymlens serve resources_servers --impl string_match`) and
# upstream's Python string_match (resources_servers/string_match/app.py
# of the released nemo-gym, from scripts/upstream.sh, started under NeMo
# Gym's launch contract as its launcher starts it: one uvicorn worker),
# each with telemetry off and on, on loopback, measured in one run.
#
# Load: Debian's wrk, BV_CONNECTIONS connections, POSTing one /verify body
# built by upstream's own request model (StringMatchVerifyRequest
# model_dump: every one of the 30 responses_create_params keys, as
# upstream's simple_agent sends it) with a sampled traceparent, as an agent
# in a fleet sends. Variants alternate over BV_ROUNDS rounds (forward, then
# reversed); each window has BV_WARMUP s of unmeasured load and BV_DURATION
# s measured. Per variant it prints the medians of req/s, p50 and p99
# latency (wrk --latency) and requests per CPU-second of the server process
# (utime + stime from /proc over the measured window), then the ratios:
# Go over Python in requests per CPU-second, and each language's on/off.
#
# Telemetry on = NEMO_GYM_OTEL_ENABLED=1, the default span groups, OTLP/gRPC
# to tools/otlpsink (a local receiver that counts and discards). For the
# released nemo-gym 0.7.0 with nemo-lens 0.1.0 "on" exports nothing: its
# telemetry set-up fails an import and stays off (docs/interop.md); the
# script prints what the sink received from each variant, so this shows.
# The py06 variants are what nemo-lens costs when it does run: nemo-gym
# 0.6.0's string_match with 0.6.0's telemetry functions called where 0.7.0
# calls them (scripts/upstream/gym06_telemetry.py, from
# `scripts/upstream.sh --release 0.6.0`), off and on.
#
#   scripts/bench-verify-upstream.sh                        # 3 rounds of 10 s, every variant
#   BV_ROUNDS=1 BV_DURATION=2 BV_WARMUP=1 scripts/bench-verify-upstream.sh   # smoke (CI)
#
# BV_PROFILE=1 also samples the Python server (py-off) with py-spy (PyPI,
# installed into a venv of the script's own when missing) over its first
# measured window and prints where its CPU went: the share of samples by the
# package of the innermost frame, and the innermost functions that held most.
#
# Settings: BV_DURATION (10), BV_WARMUP (2), BV_ROUNDS (3), BV_CONNECTIONS
# (16), BV_THREADS (2), BV_PROFILE (0), BV_VARIANTS ("go-off go-on py-off py-on py06-off
# py06-on"), BV_KEEP.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${BV_DURATION:-10}
WARMUP=${BV_WARMUP:-2}
ROUNDS=${BV_ROUNDS:-3}
CONNECTIONS=${BV_CONNECTIONS:-16}
THREADS=${BV_THREADS:-2}
read -r -a VARIANTS <<<"${BV_VARIANTS:-go-off go-on py-off py-on py06-off py06-on}"
KEEP=${BV_KEEP:-0}
PROFILE=${BV_PROFILE:-0}
PYSPY_VERSION=0.4.1
READY_TIMEOUT=60

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-bench-verify.XXXXXX")
SCRIPT_NAME=bench-verify-upstream
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=lib/load.sh
source "$ROOT/scripts/lib/load.sh"
install_cleanup

for v in "${VARIANTS[@]}"; do
  case $v in go-off | go-on | py-off | py-on | py06-off | py06-on) ;; *)
    fail "unknown variant '$v' in BV_VARIANTS (known: go-off go-on py-off py-on py06-off py06-on)"
    exit 1
    ;;
  esac
done
set_clean_env

PY=$(bash "$ROOT/scripts/upstream.sh" 2>"$WORK/upstream.txt") || {
  fail "scripts/upstream.sh failed"
  cat "$WORK/upstream.txt"
  exit 1
}
SITE=$("$PY" -c 'import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))')
PY06="" SITE06=""
if [[ " ${VARIANTS[*]} " == *" py06-"* ]]; then
  PY06=$(bash "$ROOT/scripts/upstream.sh" --release 0.6.0 2>>"$WORK/upstream.txt") || {
    fail "scripts/upstream.sh --release 0.6.0 failed"
    cat "$WORK/upstream.txt"
    exit 1
  }
  SITE06=$("$PY06" -c 'import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))')
fi
sed 's/^upstream: /     upstream: /' "$WORK/upstream.txt" | grep -E 'CPython|nemo-gym|nemo-lens|fastapi|uvicorn|opentelemetry' || true

(cd "$ROOT" && go build -o "$WORK/gymlens" ./cmd/gymlens) || { fail "go build ./cmd/gymlens failed"; exit 1; }
(cd "$ROOT/tools" && go build -o "$WORK/otlpsink" ./otlpsink) || { fail "go build ./otlpsink failed"; exit 1; }
ensure_wrk "$WORK/apt.log" || { fail "wrk is not installed and apt-get could not install it"; exit 1; }

# The body, from upstream's own model.
"$PY" - >"$WORK/body.json" <<'PYBODY'
import json
from resources_servers.string_match.app import StringMatchVerifyRequest
req = StringMatchVerifyRequest.model_validate({
    "responses_create_params": {"input": [{"role": "user", "content": "What is 17 + 25? Put the answer in \\boxed{}."}]},
    "response": {"id": "resp_1", "object": "response", "created_at": 1767225600, "model": "gym-policy",
                 "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                             "content": [{"type": "output_text", "text": "17 + 25 = 42, so the answer is \\boxed{42}.", "annotations": []}]}],
                 "parallel_tool_calls": True, "tool_choice": "auto", "tools": []},
    "expected_answer": "42", "extraction_mode": "boxed"})
print(json.dumps(req.model_dump(mode="json") | {"_ng_task_index": 0, "_ng_rollout_index": 0}))
PYBODY
{
  echo 'wrk.method = "POST"'
  echo 'wrk.headers["Content-Type"] = "application/json"'
  echo 'wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"'
  printf 'wrk.body = [==[%s]==]\n' "$(cat "$WORK/body.json")"
} >"$WORK/verify.lua"
info "load: wrk, $CONNECTIONS connections, $THREADS threads, ${WARMUP} s warm-up + ${DURATION} s measured per window, $ROUNDS rounds; body $(wc -c <"$WORK/body.json") bytes from upstream's StringMatchVerifyRequest"

declare -A PORT PID SINK
# start_sink V: a receiver of V's own, so its counts say what V exported.
start_sink() {
  local port i
  read -r port <<<"$(free_ports 1)"
  "$WORK/otlpsink" -addr "127.0.0.1:$port" >"$WORK/$1.sink" 2>&1 &
  SINK[$1]=$!
  PIDS+=("${SINK[$1]}")
  for ((i = 0; i < 100; i++)); do port_open "$port" && break; sleep 0.1; done
  SINK_PORT=$port
}
start_variant() {
  local v=$1 port env=() i
  read -r port <<<"$(free_ports 1)"
  PORT[$v]=$port
  if [[ $v == *-on ]]; then
    start_sink "$v"
    env=(NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK_PORT"
      OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_METRIC_EXPORT_INTERVAL=1000)
  fi
  if [[ $v == go-* ]]; then
    env ${clean_env[@]+"${clean_env[@]}"} ${env[@]+"${env[@]}"} "$WORK/gymlens" serve resources_servers --impl string_match \
      --name string_match --addr "127.0.0.1:$port" >"$WORK/$v.out" 2>"$WORK/$v.err" &
  else
    local py=$PY site=$SITE prog=(app.py)
    if [[ $v == py06-* ]]; then
      py=$PY06 site=$SITE06 prog=("$ROOT/scripts/upstream/gym06_telemetry.py")
    fi
    (cd "$site/resources_servers/string_match" && exec env ${clean_env[@]+"${clean_env[@]}"} ${env[@]+"${env[@]}"} \
      NEMO_GYM_CONFIG_PATH=string_match NEMO_GYM_CONFIG_DICT="string_match:
  resources_servers:
    string_match: {entrypoint: app.py, domain: knowledge, host: 127.0.0.1, port: $port}
head_server: {host: 127.0.0.1, port: 1}
dry_run: false
" "$py" "${prog[@]}" >"$WORK/$v.out" 2>"$WORK/$v.err") &
  fi
  PID[$v]=$!
  PIDS+=("${PID[$v]}")
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1 && return 0
    kill -0 "${PID[$v]}" 2>/dev/null || break
    sleep 0.1
  done
  fail "$v: the server did not answer GET / within $READY_TIMEOUT s"
  tail -n 15 "$WORK/$v.err" | sed 's/^/       /'
  exit 1
}
PYSPY=""
if [[ $PROFILE == 1 ]]; then
  PYSPY=${BV_PYSPY:-$HOME/.cache/gymlens/py-spy-$PYSPY_VERSION/bin/py-spy}
  if [[ ! -x $PYSPY ]]; then
    python3 -m venv "$(dirname "$(dirname "$PYSPY")")" && "$(dirname "$PYSPY")/pip" install -q "py-spy==$PYSPY_VERSION" >"$WORK/py-spy-install.log" 2>&1 ||
      { fail "installing py-spy $PYSPY_VERSION failed (see $WORK/py-spy-install.log)"; exit 1; }
  fi
fi
for v in "${VARIANTS[@]}"; do start_variant "$v"; done
info "servers up: $(for v in "${VARIANTS[@]}"; do printf '%s pid %s  ' "$v" "${PID[$v]}"; done)"

TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

declare -A RPS P50 P99 RPC
window() {
  local v=$1 round=$2 url="http://127.0.0.1:${PORT[$1]}/verify" c0 c1
  if ((WARMUP > 0)); then wrk -t "$THREADS" -c "$CONNECTIONS" -d "${WARMUP}s" -s "$WORK/verify.lua" "$url" >/dev/null 2>&1; fi
  local spy=""
  if [[ $PROFILE == 1 && $v == py-off && $round == 1 ]]; then
    "$PYSPY" record --nonblocking -r 200 -d "$DURATION" -f raw -o "$WORK/py-off.stacks" -p "${PID[$v]}" >"$WORK/py-spy.log" 2>&1 &
    spy=$!
  fi
  c0=$(cpu_ticks "${PID[$v]}")
  wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" --latency -s "$WORK/verify.lua" "$url" >"$WORK/$v.$round.wrk" 2>&1
  c1=$(cpu_ticks "${PID[$v]}")
  [[ -n $spy ]] && wait "$spy"
  read_load "$WORK/$v.$round.wrk"
  if [[ $LOAD_NON2XX != 0 || $LOAD_SOCKERR != 0 || -z $LOAD_TOTAL ]]; then
    fail "$v round $round: $LOAD_NON2XX non-2xx answers, $LOAD_SOCKERR socket errors"
    curl -sS -X POST -H 'Content-Type: application/json' --data-binary "@$WORK/body.json" "$url" | head -c 600 | sed 's/^/       /'
    echo
    return 0
  fi
  local rpc
  rpc=$(awk -v n="$LOAD_TOTAL" -v t=$((c1 - c0)) -v hz="$TICK" 'BEGIN { if (t == 0) t = 1; printf "%.1f", n / (t / hz) }')
  RPS[$v]+="$LOAD_RPS "
  P50[$v]+="$LOAD_P50_MS "
  P99[$v]+="$LOAD_P99_MS "
  RPC[$v]+="$rpc "
  info "$(printf '%-8s round %d: %9s req/s  p50 %8s ms  p99 %8s ms  %9s req per CPU-s' "$v" "$round" "$LOAD_RPS" "$LOAD_P50_MS" "$LOAD_P99_MS" "$rpc")"
}
alternate_rounds "$ROUNDS" window "${VARIANTS[@]}"

med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | median; }
echo
printf '     %-8s %11s %10s %10s %16s\n' variant "req/s" "p50 ms" "p99 ms" "req per CPU-s"
declare -A M
for v in "${VARIANTS[@]}"; do
  M[$v]=$(med "${RPC[$v]:-}")
  printf '     %-8s %11s %10s %10s %16s\n' "$v" "$(med "${RPS[$v]:-}")" "$(med "${P50[$v]:-}")" "$(med "${P99[$v]:-}")" "${M[$v]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
[[ -n ${M[go-off]:-} && -n ${M[py-off]:-} ]] && info "Go over Python, requests per CPU-second, telemetry off: $(ratio "${M[go-off]}" "${M[py-off]}")x"
[[ -n ${M[go-on]:-} && -n ${M[py-on]:-} ]] && info "Go over Python, requests per CPU-second, telemetry on:  $(ratio "${M[go-on]}" "${M[py-on]}")x"
[[ -n ${M[go-on]:-} && -n ${M[go-off]:-} ]] && info "gymlens on/off (requests per CPU-second): $(ratio "${M[go-on]}" "${M[go-off]}")"
[[ -n ${M[py-on]:-} && -n ${M[py-off]:-} ]] && info "nemo-gym 0.7.0 on/off (requests per CPU-second; its on exports nothing): $(ratio "${M[py-on]}" "${M[py-off]}")"
[[ -n ${M[py06-on]:-} && -n ${M[py06-off]:-} ]] && info "nemo-lens in nemo-gym 0.6.0 on/off (requests per CPU-second): $(ratio "${M[py06-on]}" "${M[py06-off]}")"
[[ -n ${M[go-on]:-} && -n ${M[py06-on]:-} ]] && info "Go over Python, requests per CPU-second, both exporting: $(ratio "${M[go-on]}" "${M[py06-on]}")x"

if [[ -s $WORK/py-off.stacks ]]; then
  echo
  info "where upstream's Python string_match spends its CPU (py-spy, innermost frame, py-off's first window):"
  python3 - "$WORK/py-off.stacks" <<'PYPROF' | sed 's/^/       /'
import collections, re, sys
by_pkg, by_fn, total = collections.Counter(), collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    if not n.isdigit():
        continue
    n = int(n)
    leaf = stack.split(";")[-1]
    m = re.match(r"(.*) \((.*?):\d+\)$", leaf)
    fn, path = (m.group(1), m.group(2)) if m else (leaf, "")
    # py-spy names a file relative to its sys.path entry: the first
    # component is the package (asyncio, pydantic, uvicorn, ...).
    rel = path.split("site-packages/")[-1]
    pkg = rel.split("/")[0] if "/" in rel else (rel or "native")
    by_pkg[pkg] += n
    by_fn[f"{fn} ({pkg})"] += n
    total += n
print(f"{total} samples")
for pkg, n in by_pkg.most_common(10):
    print(f"{100 * n / total:5.1f} %  {pkg}")
print("top functions:")
for fn, n in by_fn.most_common(8):
    print(f"{100 * n / total:5.1f} %  {fn}")
PYPROF
fi

# What each telemetry-on variant exported: servers stop (flushing), then
# their sinks print their totals.
for v in "${VARIANTS[@]}"; do stop_pid "${PID[$v]}" 15; done
for v in "${!SINK[@]}"; do
  stop_pid "${SINK[$v]}" 5
  info "$v exported: $(grep -o 'spans=.*' "$WORK/$v.sink" | tail -n 1)"
done
echo "$([[ $failed == 0 ]] && echo ok || echo FAIL) bench-verify-upstream: $failed failed checks"
exit $((failed > 0))
