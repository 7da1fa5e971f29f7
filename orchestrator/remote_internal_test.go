package orchestrator

import (
	"errors"
	"net"
	"testing"

	"github.com/gymlens/gymlens/lens"
)

func TestHostIsLocal(t *testing.T) {
	local := []net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("fd00::7")}
	lookup := func(name string) ([]string, error) {
		switch name {
		case "head.lab":
			return []string{"10.1.2.3"}, nil
		case "gpu7.lab":
			return []string{"10.1.2.9", "fd00::9"}, nil
		}
		return nil, errors.New("no such host")
	}
	for host, want := range map[string]bool{
		"": true, "localhost": true, "LocalHost": true, "127.0.0.1": true, "127.8.9.1": true, "::1": true,
		"0.0.0.0": true, "::": true, "10.1.2.3": true, "fd00::7": true, "head.lab": true,
		"10.1.2.4": false, "fd00::8": false, "gpu7.lab": false,
	} {
		got, err := hostIsLocal(host, local, lookup)
		if err != nil || got != want {
			t.Errorf("hostIsLocal(%q) = %v, %v; want %v", host, got, err, want)
		}
	}
	if _, err := hostIsLocal("nowhere.lab", local, lookup); err == nil {
		t.Error("a host that does not resolve was accepted")
	}
}

// The head publishes what a spawned server inherits, minus the variables
// that name a place on the head's host; a later value wins, as in a
// child's environment.
func TestTelemetryEnvLeavesOutHostLocalVariables(t *testing.T) {
	env := []string{
		"PATH=/usr/bin",
		lens.PrimaryPrefix + lens.KeyRunID + "=r1",
		lens.PrimaryPrefix + lens.KeyEnabled + "=0",
		lens.PrimaryPrefix + lens.KeyEnabled + "=1",
		lens.PrimaryPrefix + lens.KeyFilePath + "=/runs/r1/telemetry/orchestrator.jsonl",
		lens.FallbackPrefix + lens.KeyPrometheusAddr + "=127.0.0.1:9464",
		lens.FallbackPrefix + lens.KeySpanGroups + "=all",
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio",
		"SECRET_TOKEN=x",
	}
	got := telemetryEnv(env)
	if got.RunID != "r1" {
		t.Errorf("run id %q, want r1", got.RunID)
	}
	want := map[string]string{
		lens.PrimaryPrefix + lens.KeyRunID:       "r1",
		lens.PrimaryPrefix + lens.KeyEnabled:     "1",
		lens.FallbackPrefix + lens.KeySpanGroups: "all",
		"OTEL_TRACES_SAMPLER":                    "parentbased_traceidratio",
	}
	if len(got.Env) != len(want) {
		t.Errorf("env %v, want %v", got.Env, want)
	}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, got.Env[k], v)
		}
	}
}
