# Process bookkeeping shared by the scripts that start servers: every
# background PID goes into PIDS, and on exit each is stopped (SIGTERM, then
# SIGKILL after a grace time), newest first. Source it, set WORK, KEEP and
# SCRIPT_NAME, then call install_cleanup.

PIDS=() # background processes started and not yet reaped

# stop_pid PID [GRACE_SECONDS]: SIGTERM, then SIGKILL after the grace time.
stop_pid() {
  local pid=$1 grace=${2:-10} i
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  forget_pid "$pid"
}

forget_pid() {
  local keep=() p
  for p in ${PIDS[@]+"${PIDS[@]}"}; do
    [[ $p == "$1" ]] || keep+=("$p")
  done
  PIDS=(${keep[@]+"${keep[@]}"})
}

# cleanup stops what is still running (newest first: a fleet flushes to its
# collector while it stops) and removes WORK unless KEEP=1 or it failed.
cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    stop_pid "${PIDS[i]}" 20
  done
  if [[ $KEEP == 1 || $rc != 0 ]]; then
    echo "$SCRIPT_NAME: work directory kept: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}

install_cleanup() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
