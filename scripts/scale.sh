#!/usr/bin/env bash
# Figures for docs/scale.md: what telemetry costs per rollout on the wire
# and in the collector tier, measured on simulated hosts (network
# namespaces: needs root). Builds the tier's binaries like
# scripts/collector-tier.sh, then runs e2e TestScaleFigures, which prints
# one table row per case: default preset and all span groups with every
# trace kept, tail sampling at 10 %, head sampling at 1 %.
#
#   scripts/scale.sh                 # 2000 rollouts per case (about 2 min)
#   SCALE_ROLLOUTS=5000 scripts/scale.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/tools.sh
source "$ROOT/scripts/lib/tools.sh"
otelcol=$(build_tool otelcol ./otelcol)
jaeger=$(build_tool jaeger github.com/jaegertracing/jaeger/cmd/jaeger github.com/jaegertracing/jaeger)
cd "$ROOT"
GYMLENS_SCALE_ROLLOUTS=${SCALE_ROLLOUTS:-2000} GYMLENS_REQUIRE_COLLECTOR_TIER=1 \
  GYMLENS_OTELCOL_BIN=$otelcol GYMLENS_JAEGER_BIN=$jaeger \
  go test -count=1 -timeout 30m -run '^TestScaleFigures$' -v ./e2e/ | grep -E '^\s+(\||scale_test)|^(ok|FAIL|---)'
