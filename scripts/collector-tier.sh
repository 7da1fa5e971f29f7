#!/usr/bin/env bash
# The multi-host deployment end to end: builds the collector distribution
# (tools/bin/otelcol, from tools/otelcol) and Jaeger (tools/bin/jaeger),
# checks that both configurations of deploy/otel-collector/ load, then runs
# e2e TestCollectorTierAcrossHosts and TestTailSamplingKeepsSlowRollouts,
# which start four simulated hosts (network namespaces: the fleet's three,
# each with a collector agent, and one with the gateway, Jaeger and
# Prometheus) and check traces, tail sampling, gym_servers_active and
# gymlens report from the backends through the tier. Needs root (network
# namespaces) and prometheus on PATH (.ci/run installs Debian's).
#
#   scripts/collector-tier.sh
#   COLLECTOR_TIER_RUN='TestCollectorTierAcrossHosts' scripts/collector-tier.sh -v
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/tools.sh
source "$ROOT/scripts/lib/tools.sh"

t0=$(date +%s)
otelcol=$(build_tool otelcol ./otelcol)
jaeger=$(build_tool jaeger github.com/jaegertracing/jaeger/cmd/jaeger github.com/jaegertracing/jaeger)
echo "collector-tier: tools built in $(($(date +%s) - t0)) s: $otelcol, $jaeger"
GYM_GATEWAYS='[127.0.0.1:4317]' "$otelcol" validate --config "$ROOT/deploy/otel-collector/agent.yaml"
"$otelcol" validate --config "$ROOT/deploy/otel-collector/gateway.yaml"
echo "collector-tier: agent.yaml and gateway.yaml load"

cd "$ROOT"
GYMLENS_REQUIRE_COLLECTOR_TIER=1 GYMLENS_OTELCOL_BIN=$otelcol GYMLENS_JAEGER_BIN=$jaeger \
  go test -count=1 -timeout 15m -run "${COLLECTOR_TIER_RUN:-^(TestCollectorTierAcrossHosts|TestTailSamplingKeepsSlowRollouts)$}" "$@" ./e2e/
