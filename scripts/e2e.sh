#!/usr/bin/env bash
# Jaeger end to end: the fleet's OTLP export checked against a real Jaeger v2.
#
# Builds Jaeger (tools/bin/jaeger, from the tools/ module; reused when it is
# already there at the pinned version), then for each OTLP protocol - gRPC
# (the default) and http/protobuf - starts a fresh in-memory Jaeger on free
# loopback ports, runs `gymlens run` against it and lets tools/e2echeck assert,
# through Jaeger's query API, that every rollout is one trace across the
# orchestrator, agent, model and resources processes with CLIENT->SERVER
# parentage on every hop, right span kinds and nothing sensitive exported.
#
# Prints one line per check ("ok  ..." or "FAIL ...") and a closing
# "e2e: N passed, M failed"; exits 0 only when every check passed. Every
# process it starts is stopped by PID on exit, also on failure or Ctrl-C.
#
#   scripts/e2e.sh                   # from any directory
#   E2E_ROLLOUTS=50 scripts/e2e.sh   # more rollouts per protocol
#   E2E_KEEP=1 scripts/e2e.sh        # keep the work directory (logs, runs)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/tools
JAEGER_CONFIG=$TOOLS/jaeger/config.yaml
ROLLOUTS=${E2E_ROLLOUTS:-20}
KEEP=${E2E_KEEP:-0}
READY_TIMEOUT=30 # s for Jaeger to listen
GYM_TIMEOUT=120  # s for one gymlens run
CHECK_WAIT=60s   # for spans to show up in Jaeger

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-e2e.XXXXXX")
passed=0
failed=0

SCRIPT_NAME=e2e
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
install_cleanup

ok() {
  echo "ok  $*"
  passed=$((passed + 1))
}
fail() {
  echo "FAIL $*"
  failed=$((failed + 1))
}

# secs_since START_EPOCH_NS: elapsed seconds with one decimal.
secs_since() {
  local now
  now=$(date +%s%N)
  printf '%d.%01d' $(((now - $1) / 1000000000)) $((((now - $1) / 100000000) % 10))
}

# Only this script's telemetry settings reach the fleet.
clean_env=()
while read -r name; do
  case $name in NEMO_GYM_OTEL_* | NEMO_LENS_* | OTEL_*) clean_env+=(-u "$name") ;; esac
done < <(compgen -e)

# ---- Jaeger, built once -----------------------------------------------------

# shellcheck source=lib/tools.sh
source "$ROOT/scripts/lib/tools.sh"
t0=$(date +%s%N)
if JAEGER=$(build_tool jaeger github.com/jaegertracing/jaeger/cmd/jaeger github.com/jaegertracing/jaeger); then
  ok "jaeger: $JAEGER ready in $(secs_since "$t0")s (a few minutes the first time, reused at the pinned version)"
else
  fail "jaeger: go build failed"
  echo "e2e: $passed passed, $failed failed"
  exit 1
fi

start_all=$(date +%s%N)
if ! (cd "$ROOT" && go build -o "$WORK/gymlens" ./cmd/gymlens) ||
  ! (cd "$TOOLS" && GOWORK=off go build -o "$WORK/e2echeck" ./e2echeck); then
  fail "go build of gym or tools/e2echeck failed"
  echo "e2e: $passed passed, $failed failed"
  exit 1
fi

# ---- one protocol ---------------------------------------------------------

# fleet_pids: processes still running the gym binary of this script.
fleet_pids() {
  local d
  for d in /proc/[0-9]*; do
    [[ $(readlink "$d/exe" 2>/dev/null) == "$WORK/gymlens" ]] && echo "${d#/proc/}"
  done
  return 0
}

# port_open PORT: something listens on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

run_protocol() {
  local proto=$1 label=$1 dir=$WORK/${1//\//-}
  mkdir -p "$dir"
  # A fresh Jaeger, so the service list and traces are this run's only.
  # Free ports are picked before Jaeger binds them; should another process
  # take one in between, Jaeger exits and is tried again on new ports.
  local ports p_grpc p_http p_query p_qgrpc t0 jpid attempt waited ready=0
  t0=$(date +%s%N)
  for attempt in 1 2 3; do
    ports=$("$WORK/e2echeck" -free-ports 4 | tr '\n' ' ')
    read -r p_grpc p_http p_query p_qgrpc <<<"$ports"
    JAEGER_OTLP_GRPC=127.0.0.1:$p_grpc JAEGER_OTLP_HTTP=127.0.0.1:$p_http \
      JAEGER_QUERY_HTTP=127.0.0.1:$p_query JAEGER_QUERY_GRPC=127.0.0.1:$p_qgrpc \
      "$JAEGER" --config "$JAEGER_CONFIG" >"$dir/jaeger.log" 2>&1 &
    jpid=$!
    PIDS+=("$jpid")
    waited=0
    while ((waited < READY_TIMEOUT * 10)) && kill -0 "$jpid" 2>/dev/null; do
      if port_open "$p_query" && port_open "$p_grpc" && port_open "$p_http"; then
        ready=1
        break
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
    ((ready == 1)) && break
    stop_pid "$jpid"
    echo "e2e: jaeger did not start (attempt $attempt):" >&2
    tail -n 5 "$dir/jaeger.log" >&2
  done
  if ((ready == 0)); then
    fail "jaeger did not come up (3 attempts, up to ${READY_TIMEOUT}s each) ($label)"
    tail -n 20 "$dir/jaeger.log" | sed 's/^/       /'
    return
  fi
  ok "jaeger pid $jpid listening after $(secs_since "$t0")s: OTLP grpc :$p_grpc, http :$p_http, query :$p_query ($label)"

  local endpoint=http://127.0.0.1:$p_grpc
  local env_proto=()
  if [[ $proto == http/protobuf ]]; then
    endpoint=http://127.0.0.1:$p_http
    env_proto=(OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)
  fi
  t0=$(date +%s%N)
  env ${clean_env[@]+"${clean_env[@]}"} NEMO_GYM_OTEL_SPAN_GROUPS=all OTEL_EXPORTER_OTLP_ENDPOINT="$endpoint" \
    ${env_proto[@]+"${env_proto[@]}"} \
    "$WORK/gymlens" run --rollouts "$ROLLOUTS" --runs-dir "$dir/runs" --quiet >"$dir/gym.out" 2>"$dir/gym.err" &
  local gpid=$! rc=0
  PIDS+=("$gpid")
  waited=0
  while kill -0 "$gpid" 2>/dev/null && ((waited < GYM_TIMEOUT * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$gpid" 2>/dev/null; then
    fail "gymlens run still running after ${GYM_TIMEOUT}s; stopped ($label)"
    stop_pid "$gpid" 30
    stop_pid "$jpid"
    return
  fi
  wait "$gpid" || rc=$?
  forget_pid "$gpid"
  local run_dir
  run_dir=$(find "$dir/runs" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -n 1 || true)
  if [[ $rc != 0 || -z $run_dir ]]; then
    fail "gymlens run exited $rc after $(secs_since "$t0")s ($label)"
    tail -n 20 "$dir/gym.err" | sed 's/^/       /'
    stop_pid "$jpid"
    return
  fi
  ok "gymlens run: $ROLLOUTS rollouts to $endpoint in $(secs_since "$t0")s, exit 0 ($label)"

  local left
  left=$(fleet_pids | tr '\n' ' ')
  if [[ -z $left ]]; then
    ok "fleet processes left running after gymlens run: 0 ($label)"
  else
    fail "fleet processes left running after gymlens run: $left($label)"
  fi

  # The OTel SDK reports failed exports on the processes' stderr.
  local errs
  errs=$(cat "$dir/gym.err" "$run_dir"/logs/*.log 2>/dev/null |
    grep -ciE 'failed to (upload|export|send)|telemetry flush|export(er)? (error|failed)|rpc error|connection refused' || true)
  if [[ $errs == 0 ]]; then
    ok "OTLP export errors in fleet logs: 0 ($label)"
  else
    fail "OTLP export errors in fleet logs: $errs ($label)"
    cat "$dir/gym.err" "$run_dir"/logs/*.log 2>/dev/null |
      grep -iE 'failed to (upload|export|send)|telemetry flush|export(er)? (error|failed)|rpc error|connection refused' |
      head -n 5 | sed 's/^/       /'
  fi

  local out=$dir/checks.txt crc=0
  "$WORK/e2echeck" -query "http://127.0.0.1:$p_query" -run-dir "$run_dir" -label "$label" \
    -wait "$CHECK_WAIT" >"$out" 2>&1 || crc=$?
  cat "$out"
  local n_ok n_fail
  n_ok=$(grep -c '^ok  ' "$out" || true)
  n_fail=$(grep -c '^FAIL' "$out" || true)
  passed=$((passed + n_ok))
  failed=$((failed + n_fail))
  if [[ $crc != 0 && $n_fail == 0 ]]; then
    fail "e2echeck exited $crc ($label)"
  fi
  if ((n_fail > 0 || crc != 0)); then
    echo "       jaeger log: $dir/jaeger.log; fleet: $run_dir"
  fi

  stop_pid "$jpid"
}

run_protocol grpc
run_protocol http/protobuf

echo "e2e: took $(secs_since "$start_all")s without the jaeger build"
echo "e2e: $passed passed, $failed failed"
[[ $failed == 0 ]]
