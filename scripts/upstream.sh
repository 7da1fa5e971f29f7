#!/usr/bin/env bash
# Installs the released NeMo Gym that gymlens's interop tests run against:
# nemo-gym and nemo-lens from PyPI, at the versions (and sha256 hashes) of
# scripts/upstream/requirements.lock, into a Python venv cached outside the
# clone and keyed by that lock, so a second run takes seconds.
#
# It prints what it provides; its last line is the absolute path of the
# Python interpreter that has it (tests read it from GYMLENS_UPSTREAM_PYTHON).
#
#   scripts/upstream.sh                      install or reuse nemo-gym 0.7.0
#                                            (the wire reference), print the interpreter
#   scripts/upstream.sh --release 0.6.0      the same for nemo-gym 0.6.0, the newest
#                                            release whose telemetry package works with a
#                                            released nemo-lens (the telemetry reference;
#                                            tests read GYMLENS_UPSTREAM_TELEMETRY_PYTHON)
#   scripts/upstream.sh [--release R] --relock
#                                            resolve that release's pins again from PyPI
#                                            and rewrite its lock (then commit it)
#
# Settings: GYMLENS_UPSTREAM_CACHE (default ~/.cache/gymlens/upstream),
# GYMLENS_UPSTREAM_BASE_PYTHON (a CPython 3.13 to build the venv from;
# default pyenv's 3.13.x, else python3.13 on PATH).
#
# nemo-gym >= 0.5 declares Requires-Python >= 3.13.14; the CPython 3.13
# reachable here is older by patch levels only, so pip runs with
# --ignore-requires-python. Nothing of upstream's is edited.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
release=0.7.0
if [ "${1:-}" = "--release" ]; then
  release=${2:?--release needs a version}
  shift 2
fi
# Each release's lock, and what --relock resolves it from.
case $release in
  0.7.0)
    lock="$here/upstream/requirements.lock"
    roots=("nemo-gym[telemetry]==0.7.0" "nemo-lens[sdk]==0.1.0" "uv==0.13.10") ;;
  0.6.0)
    lock="$here/upstream/requirements-0.6.0.lock"
    roots=("nemo-gym[telemetry]==0.6.0" "nemo-lens[sdk,fastapi,aiohttp]==0.1.0") ;;
  *) echo "upstream.sh: no lock for nemo-gym $release (known: 0.7.0, 0.6.0)" >&2; exit 2 ;;
esac

say() { printf '%s\n' "$*" >&2; }
die() { say "upstream.sh: $*"; exit 1; }

base_python() {
  if [ -n "${GYMLENS_UPSTREAM_BASE_PYTHON:-}" ]; then
    echo "$GYMLENS_UPSTREAM_BASE_PYTHON"; return
  fi
  if command -v pyenv >/dev/null 2>&1; then
    local v
    v=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.13\.[0-9]+$' | sort -V | tail -n1 || true)
    if [ -n "$v" ] && [ -x "$(pyenv prefix "$v")/bin/python3.13" ]; then
      echo "$(pyenv prefix "$v")/bin/python3.13"; return
    fi
  fi
  if command -v python3.13 >/dev/null 2>&1; then command -v python3.13; return; fi
  die "no CPython 3.13 found (pyenv's 3.13.x or python3.13 on PATH); set GYMLENS_UPSTREAM_BASE_PYTHON"
}

if [ "${1:-}" = "--relock" ]; then
  py=$(base_python)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$py" -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" install -q --disable-pip-version-check --ignore-requires-python \
    --dry-run --ignore-installed --report "$tmp/report.json" "${roots[@]}"
  "$tmp/venv/bin/python" - "$tmp/report.json" "$lock" "${roots[*]}" <<'PY'
import json, sys
report, out, roots = sys.argv[1], sys.argv[2], sys.argv[3]
items = json.load(open(report))["install"]
lines = [f"# Written by scripts/upstream.sh --relock from: {roots}",
         "# One wheel per package, for CPython 3.13 on linux x86_64; installed with",
         "# pip --require-hashes --no-deps --ignore-requires-python."]
for it in sorted(items, key=lambda i: i["metadata"]["name"].lower()):
    h = it["download_info"]["archive_info"]["hashes"]["sha256"]
    lines.append(f'{it["metadata"]["name"]}=={it["metadata"]["version"]} --hash=sha256:{h}')
open(out, "w").write("\n".join(lines) + "\n")
print(f"{len(items)} packages pinned in {out}", file=sys.stderr)
PY
  exit 0
fi

[ -f "$lock" ] || die "missing $lock (run scripts/upstream.sh --relock)"
cache=${GYMLENS_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gymlens/upstream}
key=$(sha256sum "$lock" | cut -c1-16)
venv="$cache/$key/venv"

if [ ! -f "$venv/.gymlens-complete" ]; then
  py=$(base_python)
  say "upstream.sh: installing $(grep -c '^[A-Za-z]' "$lock") pinned packages into $venv (about a minute on a warm pip cache)"
  rm -rf "$cache/$key"
  mkdir -p "$cache/$key"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps \
    --ignore-requires-python -r "$lock" >&2 || die "pip install failed"
  "$venv/bin/python" -c 'import nemo_gym, nemo.lens, openai, pydantic' || die "the installed upstream does not import"
  touch "$venv/.gymlens-complete"
fi

"$venv/bin/python" - <<'PY' >&2
import importlib.metadata as md, platform
print("upstream: CPython", platform.python_version(), "(nemo-gym asks for >= 3.13.14; installed with --ignore-requires-python)")
for p in ("nemo-gym", "nemo-lens", "openai", "pydantic", "fastapi", "ray", "opentelemetry-sdk", "uv"):
    try:
        print(f"upstream: {p} {md.version(p)}")
    except md.PackageNotFoundError:
        print(f"upstream: {p} not installed")
PY
echo "$venv/bin/python"
