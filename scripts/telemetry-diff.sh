#!/usr/bin/env bash
# Telemetry side by side: what gymlens's Go string_match exports next to
# what NeMo Gym's Python string_match exports, under the same settings and
# the same requests, diffed mechanically.
#
# The upstream side is nemo-gym 0.6.0 with nemo-lens 0.1.0, both as
# released (scripts/upstream.sh --release 0.6.0): 0.6.0's
# resources_servers/string_match/app.py under NeMo Gym's launch contract,
# with 0.6.0's own telemetry functions called where nemo-gym 0.7.0 calls
# them, by scripts/upstream/gym06_telemetry.py (its header names each call
# and 0.7.0's file:line). No release exports telemetry from its servers by
# itself: 0.7.0 fails an import with the released nemo-lens and stays off,
# 0.6.0 never calls its telemetry package (docs/interop.md).
#
# Both servers get the same NEMO_GYM_OTEL_* / OTEL_* variables (telemetry
# on, exporter otlp over gRPC, span groups `all`, service name nemo-gym, a
# short metric export interval), each exporting to its own recording
# receiver (tools/otlpsink -record). Both get the same /verify requests,
# bodies made by upstream's StringMatchVerifyRequest model_dump (as
# scripts/bench-verify-upstream.sh makes them): TD_REQUESTS of them,
# alternately rewarded 1 and 0, the first with a sampled traceparent. Both
# are then stopped with SIGTERM (each flushes), and tools/teldiff prints one
# Markdown table: per item "same", "differs: how", "only gymlens" or
# "only upstream". The versions of both sides come first.
#
#   scripts/telemetry-diff.sh            # table on stdout, progress on stderr
#
# Settings: TD_REQUESTS (8), TD_SPAN_GROUPS (all; `default` shows upstream
# gating gym.verify.* on the verify group), TD_KEEP=1 keeps the work
# directory (the two recordings, go.jsonl and py.jsonl, and the servers'
# logs).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQUESTS=${TD_REQUESTS:-8}
SPAN_GROUPS=${TD_SPAN_GROUPS:-all}
KEEP=${TD_KEEP:-0}
READY_TIMEOUT=120
TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-telemetry-diff.XXXXXX")
SCRIPT_NAME=telemetry-diff
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=lib/load.sh
source "$ROOT/scripts/lib/load.sh"
install_cleanup
set_clean_env
say() { echo "$SCRIPT_NAME: $*" >&2; }
die() {
  say "$*"
  exit 1
}

PY=$(bash "$ROOT/scripts/upstream.sh" --release 0.6.0 2>"$WORK/upstream.txt") || {
  cat "$WORK/upstream.txt" >&2
  die "scripts/upstream.sh --release 0.6.0 failed"
}
SITE=$("$PY" -c 'import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))')

say "building gym, otlpsink and teldiff"
(cd "$ROOT" && go build -o "$WORK/gymlens" ./cmd/gymlens) || die "go build ./cmd/gymlens failed"
(cd "$ROOT/tools" && go build -o "$WORK/otlpsink" ./otlpsink && go build -o "$WORK/teldiff" ./teldiff) ||
  die "go build of tools/otlpsink and tools/teldiff failed"

# Versions, first on stdout.
GO_SDK=$(cd "$ROOT" && go list -m -f '{{.Version}}' go.opentelemetry.io/otel/sdk)
echo "gymlens: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown) ($(go env GOVERSION), go.opentelemetry.io/otel/sdk $GO_SDK)"
"$PY" - <<'PYVERSIONS'
import platform
from importlib.metadata import version
names = ["nemo-gym", "nemo-lens", "opentelemetry-sdk", "opentelemetry-instrumentation-fastapi", "fastapi", "uvicorn"]
print("upstream: " + ", ".join(f"{n} {version(n)}" for n in names) + f" (CPython {platform.python_version()}),"
      " 0.6.0's telemetry functions called at 0.7.0's call sites by scripts/upstream/gym06_telemetry.py")
PYVERSIONS
echo "both: NEMO_GYM_OTEL_SPAN_GROUPS=$SPAN_GROUPS, OTLP/gRPC, $REQUESTS verify requests (rewards alternately 1 and 0, the first with a traceparent)"
echo

# The bodies, from upstream's own model: one rewarded 1, one rewarded 0.
"$PY" - "$WORK" <<'PYBODY'
import json, sys
from resources_servers.string_match.app import StringMatchVerifyRequest
for name, expected in (("body1.json", "42"), ("body0.json", "41")):
    req = StringMatchVerifyRequest.model_validate({
        "responses_create_params": {"input": [{"role": "user", "content": "What is 17 + 25? Put the answer in \\boxed{}."}]},
        "response": {"id": "resp_1", "object": "response", "created_at": 1767225600, "model": "gym-policy",
                     "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                                 "content": [{"type": "output_text", "text": "17 + 25 = 42, so the answer is \\boxed{42}.", "annotations": []}]}],
                     "parallel_tool_calls": True, "tool_choice": "auto", "tools": []},
        "expected_answer": expected, "extraction_mode": "boxed"})
    with open(f"{sys.argv[1]}/{name}", "w") as f:
        json.dump(req.model_dump(mode="json"), f)
PYBODY

# start_sink SIDE: a recording receiver of SIDE's own; sets SINK_PORT.
declare -A SINK_PID SERVER_PID
start_sink() {
  local port i
  read -r port <<<"$(free_ports 1)"
  "$WORK/otlpsink" -addr "127.0.0.1:$port" -record "$WORK/$1.jsonl" >"$WORK/$1.sink" 2>&1 &
  SINK_PID[$1]=$!
  PIDS+=("${SINK_PID[$1]}")
  for ((i = 0; i < 100; i++)); do port_open "$port" && break; sleep 0.1; done
  port_open "$port" || die "$1: the receiver did not listen"
  SINK_PORT=$port
}
# telemetry_env PORT: the settings both sides get.
telemetry_env() {
  tel_env=(NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=otlp NEMO_GYM_OTEL_SPAN_GROUPS="$SPAN_GROUPS"
    NEMO_GYM_OTEL_RUN_ID=teldiff OTEL_SERVICE_NAME=nemo-gym OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$1"
    OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_METRIC_EXPORT_INTERVAL=500)
}

read -r GO_PORT PY_PORT <<<"$(free_ports 2)"
start_sink go
telemetry_env "$SINK_PORT"
env ${clean_env[@]+"${clean_env[@]}"} "${tel_env[@]}" "$WORK/gymlens" serve resources_servers --impl string_match \
  --name string_match --addr "127.0.0.1:$GO_PORT" >"$WORK/go.out" 2>"$WORK/go.err" &
SERVER_PID[go]=$!
PIDS+=("${SERVER_PID[go]}")

start_sink py
telemetry_env "$SINK_PORT"
(cd "$SITE/resources_servers/string_match" && exec env ${clean_env[@]+"${clean_env[@]}"} "${tel_env[@]}" \
  RAY_USAGE_STATS_ENABLED=0 PYTHONDONTWRITEBYTECODE=1 NEMO_GYM_CONFIG_PATH=string_match NEMO_GYM_CONFIG_DICT="string_match:
  resources_servers:
    string_match: {entrypoint: app.py, domain: knowledge, host: 127.0.0.1, port: $PY_PORT}
head_server: {host: 127.0.0.1, port: 1}
dry_run: false
" "$PY" "$ROOT/scripts/upstream/gym06_telemetry.py" >"$WORK/py.out" 2>"$WORK/py.err") &
SERVER_PID[py]=$!
PIDS+=("${SERVER_PID[py]}")

declare -A PORT=([go]=$GO_PORT [py]=$PY_PORT)
for side in go py; do
  for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
    curl -fsS "http://127.0.0.1:${PORT[$side]}/" >/dev/null 2>&1 && break
    kill -0 "${SERVER_PID[$side]}" 2>/dev/null || break
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:${PORT[$side]}/" >/dev/null 2>&1 || {
    tail -n 20 "$WORK/$side.err" >&2
    die "$side: the server did not answer GET / within $READY_TIMEOUT s"
  }
done
say "both servers up; sending $REQUESTS verify requests to each"

for side in go py; do
  for ((i = 0; i < REQUESTS; i++)); do
    body=$WORK/body$(((i + 1) % 2)).json
    hdr=()
    ((i == 0)) && hdr=(-H "traceparent: $TRACEPARENT")
    reward=$(curl -fsS -X POST -H 'Content-Type: application/json' ${hdr[@]+"${hdr[@]}"} --data-binary "@$body" \
      "http://127.0.0.1:${PORT[$side]}/verify" | python3 -c 'import json, sys; print(json.load(sys.stdin)["reward"])') ||
      die "$side: POST /verify failed"
    # Rewards alternate 1, 0, 1, ... (JSON 1, 1.0 and the like all print as 1 or 1.0).
    [[ $reward == "$((i % 2 == 0))" || $reward == "$((i % 2 == 0)).0" ]] || die "$side: request $i rewarded $reward"
  done
done
sleep 1 # one metric export interval and more, so a periodic export happened

say "stopping both servers (each flushes its telemetry)"
for side in go py; do stop_pid "${SERVER_PID[$side]}" 30; done
for side in go py; do
  stop_pid "${SINK_PID[$side]}" 5
  say "$side exported: $(grep -o 'spans=.*' "$WORK/$side.sink" | tail -n 1)"
  [[ -s $WORK/$side.jsonl ]] || die "$side exported nothing"
done
"$WORK/teldiff" -trace-id "$(cut -d- -f2 <<<"$TRACEPARENT")" "$WORK/go.jsonl" "$WORK/py.jsonl"
