#!/usr/bin/env bash
# Memory, file descriptors and latency while 20 000 idle connections are
# held against one server, under load.
#
# Runs one `gymlens serve resources_servers --name arithmetic` (telemetry off,
# the runtime's limits at their defaults unless GYM_SERVER_* variables say
# otherwise, see docs/performance.md) and, from a Python holder, opens
# SOAK_IDLE connections (20 000) to it, each sending one GET /health and
# then sitting idle in keep-alive, the way the issue's 7 829 idle
# connections held 349 MB and 20 000 exhausted the fd limit. While they
# are held, wrk (64 connections, 2 threads) drives POST /verify for
# SOAK_DURATION seconds; the server's VmRSS and open descriptors are read
# from /proc every second.
#
# Targets (a line each, "ok  " or "FAIL"):
#
#   the server never runs out of descriptors: its largest count of open
#     descriptors stays below its RLIMIT_NOFILE (SOAK_NOFILE, raised in this
#     script when it may be, else the hard limit)
#   a new caller is answered: after the holder has opened every connection,
#     one GET /health on a new connection answers 200 (curl, 5 s)
#   no load request failed: wrk reports no non-2xx answer and no socket error
#   RSS stays under SOAK_RSS_LIMIT_MIB (512: 4 096 idle connections hold
#     about 135 MiB, and gymlens serve's GOGC of 400 lets the heap grow to five
#     times its live size under load; without the cap it passed 1.2 GiB)
#   the server exits cleanly within 40 s of SIGTERM
#
# Also printed: how many of the holder's connections the server kept open
# (the rest it closed to stay under its connection cap), p50/p99/slowest
# latency and req/s, RSS before, with the connections held and largest.
#
#   scripts/soak-conns.sh                         # 30 s of load
#   SOAK_DURATION=120 SOAK_IDLE=20000 scripts/soak-conns.sh
#   GYM_SERVER_MAX_CONNS=off scripts/soak-conns.sh   # the fault: no cap
#
# Settings: SOAK_IDLE (20000), SOAK_DURATION (s, 30), SOAK_CONNECTIONS (64),
# SOAK_THREADS (2), SOAK_NOFILE (65536, or the hard limit when it cannot be
# raised), SOAK_RSS_LIMIT_MIB (512), SOAK_KEEP (0). Needs go, python3, curl
# and wrk.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IDLE=${SOAK_IDLE:-20000}
DURATION=${SOAK_DURATION:-30}
CONNECTIONS=${SOAK_CONNECTIONS:-64}
THREADS=${SOAK_THREADS:-2}
NOFILE=${SOAK_NOFILE:-65536}
RSS_LIMIT_MIB=${SOAK_RSS_LIMIT_MIB:-512}
KEEP=${SOAK_KEEP:-0}
READY_TIMEOUT=30 # s for the server to listen
EXIT_BOUND=40    # s after SIGTERM

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gym-soak-conns.XXXXXX")

SCRIPT_NAME=soak-conns
# shellcheck source=lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=lib/load.sh
source "$ROOT/scripts/lib/load.sh"
install_cleanup

check() {
  if (($1)); then ok "$2"; else fail "$2"; fi
}

# The holder needs a descriptor per connection it holds, and so would a
# server without a cap; the server's own cap is derived from its limit.
# Without the privilege to raise the hard limit, the hard limit it is (the
# holder then drops the connections the server closed to reuse their
# descriptors, so it can still open all SOAK_IDLE).
if ! ulimit -n "$NOFILE" 2>/dev/null; then
  info "cannot raise the fd limit to $NOFILE: using the hard limit $(ulimit -Hn)"
  ulimit -n "$(ulimit -Hn)"
fi

set_clean_env

t0=$(now_ns)
if ! (cd "$ROOT" && go build -o "$WORK/gymlens" ./cmd/gymlens); then
  fail "go build ./cmd/gymlens failed"
  exit 1
fi
info "gym built in $(secs "$t0") s; $(nproc) CPUs shared by server, holder and load generator; fd limit $(ulimit -n)"
if ! ensure_wrk "$WORK/apt.log"; then
  fail "wrk is not installed and could not be installed with apt-get (see $WORK/apt.log)"
  exit 1
fi
write_verify_lua "$WORK/verify.lua"

start_serve soak "$WORK" NEMO_GYM_OTEL_ENABLED=0 -- || exit 1
pid=$SERVE_PID addr=$SERVE_ADDR
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true; }
fds() { find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
server_nofile=$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")
rss_idle=$(rss_kib)
info "server pid $pid on $addr: RLIMIT_NOFILE $server_nofile, RSS $((rss_idle / 1024)) MiB, $(fds) descriptors; limits from the environment: $(env | grep -c '^GYM_SERVER_' || true) set"

# ---- the holder: IDLE keep-alive connections, held until told to stop ----

cat >"$WORK/hold.py" <<'EOF'
import os, select, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n, ready_file, stop_file = int(sys.argv[2]), sys.argv[3], sys.argv[4]
req = b"GET /health HTTP/1.1\r\nHost: soak\r\n\r\n"
socks, refused, failed, dropped = [], 0, 0, 0

def prune():
    """Drops the connections the server closed; returns how many."""
    global socks
    p = select.poll()
    for s in socks:
        p.register(s, select.POLLIN)
    closed = {fd for fd, ev in p.poll(0)}
    keep = []
    for s in socks:
        if s.fileno() in closed:
            s.close()
        else:
            keep.append(s)
    gone = len(socks) - len(keep)
    socks = keep
    return gone

t0 = time.time()
for i in range(n):
    if i % 256 == 255:
        dropped += prune()
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, int(port)))
        s.sendall(req)
        got = s.recv(4096)
        if got.startswith(b"HTTP/1.1 200"):
            socks.append(s)
            continue
        refused += got.startswith(b"HTTP/1.1 503")
        failed += not got.startswith(b"HTTP/1.1 503")
    except OSError:
        failed += 1
    s.close()
opened = time.time() - t0
dropped += prune()
with open(ready_file, "w") as f:
    f.write(f"{n - refused - failed} {refused} {failed} {opened:.1f} {len(socks)} {dropped}\n")
while not os.path.exists(stop_file):
    time.sleep(0.2)
prune()
print(len(socks))
EOF

python3 "$WORK/hold.py" "$addr" "$IDLE" "$WORK/held" "$WORK/stop" >"$WORK/hold.out" 2>"$WORK/hold.err" &
hpid=$!
PIDS+=("$hpid")
for ((i = 0; i < 600 * 10; i++)); do
  [[ -s $WORK/held ]] && break
  kill -0 "$hpid" 2>/dev/null || break
  sleep 0.1
done
if [[ ! -s $WORK/held ]]; then
  fail "the holder did not open its connections"
  sed 's/^/       /' "$WORK/hold.err"
  exit 1
fi
read -r answered refused hold_failed open_secs alive_after_open closed_by_server <"$WORK/held"
rss_held=$(rss_kib)
fds_held=$(fds)
info "holder: $IDLE connections opened in $open_secs s: $answered answered 200, $refused 503, $hold_failed failed; the server closed $closed_by_server idle ones to admit newer ones, $alive_after_open still open"
info "server with them held: RSS $((rss_held / 1024)) MiB, $fds_held descriptors"

code=$(curl -s -o /dev/null -m 5 -w '%{http_code}' "http://$addr/health" || true)
check "${code:-0} == 200" "a new caller behind $IDLE idle connections: GET /health answered ${code:-nothing} (want 200)"

# ---- load while the connections are held ----------------------------------

wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/verify.lua" "http://$addr/verify" >"$WORK/load.txt" 2>&1 &
wpid=$!
PIDS+=("$wpid")
rss_max=$rss_held fds_max=$fds_held
while kill -0 "$wpid" 2>/dev/null; do
  sleep 1
  r=$(rss_kib) f=$(fds)
  [[ -n $r ]] && ((r > rss_max)) && rss_max=$r
  ((f > fds_max)) && fds_max=$f
done
wait "$wpid" || true
forget_pid "$wpid"
touch "$WORK/stop"
wait "$hpid" || true
forget_pid "$hpid"
alive_end=$(cat "$WORK/hold.out" 2>/dev/null || echo "?")

read_load "$WORK/load.txt"
stop_and_wait "$pid" "$EXIT_BOUND"
code=$STOP_CODE
((code == 124)) && code=killed
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

info "$(printf 'load: %.1f req/s, %s requests in %s s; p50 %s ms, p99 %s ms, slowest %s ms' \
  "${LOAD_RPS:-0}" "${LOAD_TOTAL:-?}" "$DURATION" "${LOAD_P50_MS:-?}" "${LOAD_P99_MS:-?}" "${LOAD_MAX_MS:-?}")"
info "RSS: $(mib "$rss_idle") MiB before, $(mib "$rss_held") MiB with the connections held, largest $(mib "$rss_max") MiB; descriptors: largest $fds_max of $server_nofile; holder's connections still open at the end: $alive_end"
warns=$(grep -c 'level=WARN' "$WORK/serve.err" || true)
info "server warnings: $warns lines; $(grep -c 'accept failed' "$WORK/serve.err" || true) of them accept errors"

check "fds_max < server_nofile" "descriptors: largest $fds_max, below the limit $server_nofile"
check "LOAD_NON2XX == 0 && LOAD_SOCKERR == 0" "load requests failed: non-2xx $LOAD_NON2XX, socket errors $LOAD_SOCKERR (must be 0)"
check "rss_max <= RSS_LIMIT_MIB * 1024" "largest RSS $(mib "$rss_max") MiB (target <= $RSS_LIMIT_MIB MiB)"
if [[ $code == 0 ]]; then
  ok "server exited 0, $STOP_SECS s after SIGTERM (bound ${EXIT_BOUND} s)"
else
  fail "server exit after SIGTERM: $code after $STOP_SECS s (bound ${EXIT_BOUND} s)"
  tail -n 10 "$WORK/serve.err" | sed 's/^/       /'
fi

echo "soak-conns: $failed failed"
[[ $failed == 0 ]]
