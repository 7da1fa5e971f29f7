package orchestrator_test

import "testing"

// A metrics_addr with an empty host listens on loopback, as every address
// of the fleet does: ":0" is 127.0.0.1:0, not every interface.
func TestMetricsAddrEmptyHostIsLoopback(t *testing.T) {
	cfg := mustParse(t, "r:\n  resources_servers:\n    arithmetic: {metrics_addr: \":0\"}\nm:\n  responses_api_models:\n    policy_model: {metrics_addr: \"0.0.0.0:0\"}\n")
	if got := cfg.Servers[0].MetricsAddr; got != "127.0.0.1:0" {
		t.Errorf("metrics_addr \":0\" = %q, want 127.0.0.1:0", got)
	}
	if got := cfg.Servers[1].MetricsAddr; got != "0.0.0.0:0" {
		t.Errorf("metrics_addr \"0.0.0.0:0\" = %q, want it kept: every interface written out", got)
	}
}
