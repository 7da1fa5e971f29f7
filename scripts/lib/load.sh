# Helpers shared by the scripts that put `gymlens serve` under load from wrk
# (collector-faults.sh, bench-http.sh, soak-export.sh). Source it after
# procs.sh, with SCRIPT_NAME set. Needs python3 for free_ports.

# VERIFY_BODY is the one /verify request the load scripts send: a NeMo Gym
# verify request (a row with its task fields and the model's response)
# that the arithmetic environment scores 1.
VERIFY_BODY='{"responses_create_params":{"input":[{"role":"user","content":"What is 1 + 1?"}]},"task_id":"wrk-1","expected_answer":"2","response":{"id":"resp_1","object":"response","created_at":1767225600,"model":"gym-policy","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"The answer is 2.","annotations":[]}]}],"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}'

# Result lines: "ok   " and "FAIL " for checks against a target (each FAIL
# counts into $failed, the script's exit status), "     " for figures.
failed=0
ok() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  failed=$((failed + 1))
}
info() { echo "     $*"; }

# alternate_rounds ROUNDS FN VARIANT...: calls FN VARIANT ROUND for every
# variant in every round, in the given order in odd rounds and reversed in
# even ones, so drift over the session hits every variant alike.
alternate_rounds() {
  local rounds=$1 fn=$2 round i
  shift 2
  local variants=("$@")
  for ((round = 1; round <= rounds; round++)); do
    if ((round % 2 == 1)); then
      for ((i = 0; i < ${#variants[@]}; i++)); do "$fn" "${variants[i]}" "$round"; done
    else
      for ((i = ${#variants[@]} - 1; i >= 0; i--)); do "$fn" "${variants[i]}" "$round"; done
    fi
  done
}

now_ns() { date +%s%N; }

# secs START_NS [END_NS]: elapsed seconds with two decimals.
secs() {
  local end=${2:-$(now_ns)}
  awk -v d=$((end - $1)) 'BEGIN { printf "%.2f", d / 1e9 }'
}

# port_open PORT: something listens on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_ports N: N loopback ports free right now (bound together, then
# released, so they differ).
free_ports() {
  python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
' "$1"
}

# telemetry_variant VARIANT: sets variant_flags (arguments for `gymlens run`)
# and variant_env (VAR=value words for `env`) to run the fleet scripts'
# variant VARIANT: off (telemetry off), on (as configured), metrics (traces
# off), traces (metrics off) or nolive (telemetry off and the live view
# off too, GYMLENS_LIVE=0: off/nolive is the live view's cost). Fails,
# setting nothing, for any other name.
telemetry_variants="off on metrics traces nolive"
telemetry_variant() {
  case $1 in
    off) variant_flags=(--no-telemetry) variant_env=() ;;
    nolive) variant_flags=(--no-telemetry) variant_env=(GYMLENS_LIVE=0) ;;
    on) variant_flags=() variant_env=() ;;
    metrics) variant_flags=() variant_env=(NEMO_GYM_OTEL_TRACES_ENABLED=0) ;;
    traces) variant_flags=() variant_env=(NEMO_GYM_OTEL_METRICS_ENABLED=0) ;;
    *) return 1 ;;
  esac
}

# check_variants SCRIPT VARIANT...: exits 2, naming SCRIPT, when a variant
# is not one of telemetry_variants.
check_variants() {
  local script=$1 v
  shift
  for v in "$@"; do
    telemetry_variant "$v" || { echo "$script: unknown variant $v (${telemetry_variants// /, })" >&2; exit 2; }
  done
}

# set_clean_env: fills the array clean_env with `env` arguments that unset
# every NEMO_GYM_OTEL_*, NEMO_LENS_* and OTEL_* variable of this shell (and
# GYMLENS_LIVE), so only the script's own telemetry settings reach a server. Use it as
#   env ${clean_env[@]+"${clean_env[@]}"} NAME=VALUE ... command
set_clean_env() {
  local name
  clean_env=()
  while read -r name; do
    case $name in NEMO_GYM_OTEL_* | NEMO_LENS_* | OTEL_* | GYMLENS_LIVE) clean_env+=(-u "$name") ;; esac
  done < <(compgen -e)
}

# ensure_wrk LOG: installs Debian's wrk with apt-get when it is missing and
# this runs as root on a system with apt-get (apt output goes to LOG).
# Succeeds when wrk is available afterwards.
ensure_wrk() {
  if ! command -v wrk >/dev/null && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
    echo "$SCRIPT_NAME: installing wrk with apt-get" >&2
    apt-get install -y wrk >"$1" 2>&1 ||
      { apt-get update >>"$1" 2>&1 && apt-get install -y wrk >>"$1" 2>&1; } || true
  fi
  command -v wrk >/dev/null
}

# wait_ready OUT PID TIMEOUT: waits until process PID has written its
# ready line ("GYM_READY {...}", see `gymlens serve -h`) to the file OUT, and
# prints the address from it. Fails when the process exits first or
# TIMEOUT seconds pass.
wait_ready() {
  local out=$1 pid=$2 timeout=$3 addr="" i
  for ((i = 0; i < timeout * 10; i++)); do
    # The file appears only once the process has opened it.
    [[ -f $out ]] && addr=$(sed -n 's/^GYM_READY .*"addr":"\([^"]*\)".*/\1/p' "$out" | head -n 1)
    [[ -n $addr ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $addr ]] && echo "$addr"
}

# start_serve LABEL DIR [VAR=value...] -- [ARG...]: starts
# `gymlens serve resources_servers --name arithmetic ARG...` from $WORK/gymlens with
# the script's clean environment plus the VAR=value settings, its output in
# DIR/serve.out and DIR/serve.err, and sets SERVE_PID and SERVE_ADDR. When it
# does not get ready it fails "LABEL: gymlens serve did not get ready", shows the
# end of its stderr, stops it and returns 1.
start_serve() {
  local label=$1 dir=$2
  shift 2
  local vars=()
  while (($# > 0)) && [[ $1 != -- ]]; do
    vars+=("$1")
    shift
  done
  (($# > 0)) && shift
  env ${clean_env[@]+"${clean_env[@]}"} ${vars[@]+"${vars[@]}"} \
    "$WORK/gymlens" serve resources_servers --name arithmetic "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  SERVE_ADDR=$(wait_ready "$dir/serve.out" "$SERVE_PID" "$READY_TIMEOUT" || true)
  if [[ -z $SERVE_ADDR ]]; then
    fail "$label: gymlens serve did not get ready"
    tail -n 10 "$dir/serve.err" | sed 's/^/       /'
    stop_pid "$SERVE_PID"
    return 1
  fi
}

# read_load FILE: reads wrk's report (or one in the same format) from FILE
# into LOAD_RPS, LOAD_TOTAL (requests), LOAD_NON2XX, LOAD_SOCKERR (the sum
# of connect, read, write and timeout errors), and, when wrk ran with
# --latency, LOAD_P50_MS, LOAD_P99_MS and LOAD_MAX_MS. A figure missing
# from the report is left empty, except the two error counts, which are 0.
read_load() {
  local f=$1
  LOAD_RPS=$(awk '/^Requests\/sec:/ { print $2 }' "$f")
  LOAD_TOTAL=$(awk '/requests in/ { print $1 }' "$f")
  LOAD_NON2XX=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$f")
  LOAD_SOCKERR=$(awk '/Socket errors:/ { s = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) s += $i; print s }' "$f")
  LOAD_NON2XX=${LOAD_NON2XX:-0}
  LOAD_SOCKERR=${LOAD_SOCKERR:-0}
  # wrk prints durations as 812.00us, 1.25ms, 2.01s or 1.00m.
  local to_ms='function ms(v) {
      if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
      if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
      if (v ~ /s$/) return substr(v, 1, length(v) - 1) * 1000
      if (v ~ /m$/) return substr(v, 1, length(v) - 1) * 60000
      if (v ~ /h$/) return substr(v, 1, length(v) - 1) * 3600000
      return ""
    }'
  LOAD_P50_MS=$(awk "$to_ms"' $1 == "50%" && NF == 2 { printf "%.3f", ms($2); exit }' "$f")
  LOAD_P99_MS=$(awk "$to_ms"' $1 == "99%" && NF == 2 { printf "%.3f", ms($2); exit }' "$f")
  LOAD_MAX_MS=$(awk "$to_ms"' $1 == "Latency" && NF >= 4 { printf "%.3f", ms($4); exit }' "$f")
}

# stop_and_wait PID BOUND: SIGTERM, then waits up to BOUND seconds for the
# exit, killing the process after that. Sets STOP_SECS (how long it took)
# and STOP_CODE (the exit code; 124 when it had to be killed).
stop_and_wait() {
  local pid=$1 bound=$2 term i
  term=$(now_ns)
  STOP_CODE=0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < bound * 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  STOP_SECS=$(secs "$term")
  if kill -0 "$pid" 2>/dev/null; then
    stop_pid "$pid" 1
    STOP_CODE=124
    return 0
  fi
  wait "$pid" || STOP_CODE=$?
  forget_pid "$pid"
}

# median: the median of the numbers on stdin, one a line.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# write_verify_lua PATH: the wrk script that POSTs VERIFY_BODY to /verify.
write_verify_lua() {
  cat >"$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '$VERIFY_BODY'
LUA
}
