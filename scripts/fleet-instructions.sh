#!/usr/bin/env bash
# Telemetry's cost per rollout in user-space instructions, per process:
# the built-in fleet (`gymlens run`, model latency 0) under valgrind's
# cachegrind, which counts every instruction each process executes. Every
# variant runs twice, with SHORT and LONG rollouts; the difference of the
# two counts divided by LONG-SHORT is the steady-state count per rollout,
# without start-up and shutdown. Counts hardly move with the machine's load
# (the throughput and CPU scripts do, by several percent from one run to the
# next), so they show a change of a fraction of a percent; they do not show
# what instructions cost (cache misses, system calls, the kernel's share).
# Two parts do move: work done per unit of time (periodic metric exports,
# the process-tree gauges), which valgrind's 20-40x slowdown turns into a
# per-rollout share that grows when the run is slower, and the garbage
# collector's write barriers, whose count depends on whether a collection
# was running (runtime.wbBufFlush1, gcWriteBarrier, findObject: +-3 000 per
# rollout from run to run). Compare two trees by running their copies of
# this script at the same time, on the same machine.
#
#   scripts/fleet-instructions.sh                     # off vs on, sampler parentbased_traceidratio 0.01
#   VARIANTS="off on metrics traces" scripts/fleet-instructions.sh
#                                                     # metrics: traces off; traces: metrics off
#   SAMPLER=always_on SAMPLER_ARG= scripts/fleet-instructions.sh
#   TOP=20 scripts/fleet-instructions.sh              # the 20 functions that differ most, per process
#
# The Go scheduler's idle loops (findRunnable, lock2, ...) are left out:
# under valgrind, which runs one thread at a time, they spin in proportion
# to nothing the fleet does. Needs valgrind (apt-get install valgrind) and
# python3.
set -euo pipefail
cd "$(dirname "$0")/.."
SHORT="${SHORT:-300}"
LONG="${LONG:-1300}"
VARIANTS="${VARIANTS:-off on}"
SAMPLER="${SAMPLER-parentbased_traceidratio}"
SAMPLER_ARG="${SAMPLER_ARG-0.01}"
TOP="${TOP:-0}"
command -v valgrind >/dev/null || { echo "fleet-instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "fleet-instructions: python3 is not installed" >&2; exit 2; }
[ "$LONG" -gt "$SHORT" ] || { echo "fleet-instructions: LONG ($LONG) must be more than SHORT ($SHORT)" >&2; exit 2; }
# shellcheck source=lib/load.sh
source scripts/lib/load.sh # set_clean_env, check_variants, telemetry_variant
# shellcheck disable=SC2086 # VARIANTS is a list of words
check_variants fleet-instructions $VARIANTS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Without cgo the binary has no C start-up for valgrind to trip on.
CGO_ENABLED=0 go build -o "$work/gymlens" ./cmd/gymlens
set_clean_env

one() { # variant rollouts: one gymlens run under cachegrind, a count file per process in $work/<variant>-<rollouts>
  local v=$1 n=$2 d="$work/$1-$2"
  mkdir -p "$d"
  telemetry_variant "$v"
  local flags=(${variant_flags[@]+"${variant_flags[@]}"}) extra=(${variant_env[@]+"${variant_env[@]}"})
  # Asynchronous preemption signals crash valgrind's signal handling.
  env ${clean_env[@]+"${clean_env[@]}"} ${extra[@]+"${extra[@]}"} ${SAMPLER:+OTEL_TRACES_SAMPLER="$SAMPLER"} \
    ${SAMPLER_ARG:+OTEL_TRACES_SAMPLER_ARG="$SAMPLER_ARG"} GODEBUG=asyncpreemptoff=1 \
    valgrind --tool=cachegrind --cache-sim=no --trace-children=yes --cachegrind-out-file="$d/%p.cg" \
    "$work/gymlens" run --rollouts "$n" --concurrency 16 --model-latency-ms 0 --runs-dir "$d/runs" --quiet "${flags[@]+"${flags[@]}"}" \
    >"$d/out.txt" 2>"$d/err.txt" || { echo "fleet-instructions: gymlens run failed ($v, $n rollouts); see:" >&2; tail -n 5 "$d/err.txt" >&2; exit 1; }
  echo "  $v, $n rollouts: $(sed -nE 's/.*rollouts +(.*)/\1/p' "$d/out.txt" | head -n 1)" >&2
}

echo "fleet instructions per rollout: sampler ${SAMPLER:-default}${SAMPLER_ARG:+ $SAMPLER_ARG}, $SHORT and $LONG rollouts per variant" >&2
for v in $VARIANTS; do
  one "$v" "$SHORT"
  one "$v" "$LONG"
done

python3 - "$work" "$SHORT" "$LONG" "$TOP" $VARIANTS <<'EOF'
import collections, glob, os, re, sys

work, short, long_, top, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
idle = re.compile(r"^runtime\.(findRunnable|lock2|unlock2|casgstatus|goschedImpl|gosched_m|wakep|schedule|execute|"
                  r"globrunqget|globrunqgetbatch|stealWork|runqgrab|runqsteal|runqget|runqput|bgsweep|sweepone|"
                  r"freeDeadSpanSPMCs|futex|usleep|osyield|procyield|nanotime1|checkTimers|netpoll|mPark|notesleep|"
                  r"notewakeup|stopm|startm|park_m|mcall|gopark|goready|ready|resetspinning|injectglist|sysmon|"
                  r"retake|semrelease1|semacquire1|acquirep|releasep|handoffp|exitsyscall|entersyscall|"
                  r"reentersyscall|pidleget|pidleput|pidlegetSpinning|lockWithRank|unlockWithRank|\(\*timers\)\.check|"
                  r"freeSomeWbufs|\(\*m\)\.clearAllpSnapshot|goschedIfBusy|\(\*gcControllerState\)\.releaseNextGCMarkWorker|"
                  r"gogo\.abi0|nanotime1\.abi0|runqputbatch|\(\*timeHistogram\)\.record)$|^gogo$")

def process_name(fns, cmd):
    if " run " in cmd:
        return "orchestrator"
    # Every process links every built-in's package (their init functions
    # run everywhere): a server is told by the many functions of its own.
    count = {n: sum(1 for k in fns if "/servers/" + n in k) for n in ("agent", "model", "resources", "envserver")}
    if count["agent"] > 10:
        return "agent"
    if count["envserver"] > 10:
        return "relay"  # the environment server in front of the agent
    return max(("model", "resources"), key=lambda n: count[n])

def load(d):
    procs = {}
    for f in glob.glob(os.path.join(d, "*.cg")):
        fns, fn, cmd = collections.Counter(), None, ""
        with open(f, errors="replace") as fh:
            for line in fh:
                if line.startswith("fn="):
                    fn = line[3:].strip()
                elif line.startswith("cmd:"):
                    cmd = line
                elif fn is not None and line[:1].isdigit():
                    parts = line.split()
                    if len(parts) >= 2 and not idle.match(fn):
                        fns[fn] += int(parts[1])
        procs[process_name(fns, cmd)] = fns
    return procs

def per_rollout(v):
    a, b = load(f"{work}/{v}-{short}"), load(f"{work}/{v}-{long_}")
    out = {}
    for p in b:
        c = collections.Counter()
        for k, n in b[p].items():
            c[k] += n / (long_ - short)
        for k, n in a.get(p, {}).items():
            c[k] -= n / (long_ - short)
        out[p] = c
    return out

counts = {v: per_rollout(v) for v in variants}
base = variants[0]
procs = sorted(counts[base])
print(f"{'instructions per rollout':26s}" + "".join(f"{v:>14s}" for v in variants) + "".join(f"{v + '/' + base:>14s}" for v in variants[1:]))
for p in procs + ["fleet"]:
    tot = {v: sum(sum(counts[v][q].values()) for q in (procs if p == "fleet" else [p])) for v in variants}
    print(f"{p:26s}" + "".join(f"{tot[v]:14.0f}" for v in variants) + "".join(f"{tot[v] / tot[base]:14.3f}" for v in variants[1:]))
if top > 0:
    for v in variants[1:]:
        for p in procs:
            diff = collections.Counter()
            for k in set(counts[v][p]) | set(counts[base][p]):
                diff[k] = counts[v][p][k] - counts[base][p][k]
            print(f"\n{p}, {v} - {base}: the {top} functions that differ most (instructions per rollout)")
            for k, n in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]:
                print(f"  {n:+10.0f}  {k[:140]}")
EOF
