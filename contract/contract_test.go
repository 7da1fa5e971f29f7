package contract

import (
	"slices"
	"strings"
	"testing"
)

func TestInstrumentsAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, in := range Instruments() {
		if seen[in.Name] {
			t.Errorf("%s declared twice", in.Name)
		}
		seen[in.Name] = true
		if in.Kind == 0 || in.Source == 0 || in.Description == "" {
			t.Errorf("%s: kind, source and description are required: %+v", in.Name, in)
		}
		if strings.HasSuffix(in.Name, "_ms") && in.Unit != "ms" {
			t.Errorf("%s: a _ms name needs unit ms, has %q", in.Name, in.Unit)
		}
		if in.Kind == Histogram && in.Source != SourceSemconv && in.Boundaries != nil {
			t.Errorf("%s: gym histograms keep the SDK's default buckets, as upstream", in.Name)
		}
		if in.Kind != Histogram && in.Boundaries != nil {
			t.Errorf("%s: boundaries on a %s", in.Name, in.Kind)
		}
		for i, k := range in.Attrs {
			if k == "" || slices.Contains(in.Attrs[i+1:], k) {
				t.Errorf("%s: bad or repeated attribute key %q", in.Name, k)
			}
		}
		if got, ok := Lookup(in.Name); !ok || got.Name != in.Name {
			t.Errorf("Lookup(%s) = %v, %v", in.Name, got, ok)
		}
	}
	if _, ok := Lookup("gym.rollout.calls"); ok {
		t.Error("gym.rollout.calls is upstream's gym.rollout.completed_total now")
	}
}

func TestInstrumentsReturnsACopy(t *testing.T) {
	a := Instruments()
	a[0].Name = "changed"
	if Instruments()[0].Name == "changed" {
		t.Fatal("Instruments shares its backing array")
	}
}

func TestPrometheusName(t *testing.T) {
	for name, want := range map[string]string{
		RolloutDuration:           "gym_rollout_duration_ms_milliseconds",
		VerifySuccessRate:         "gym_verify_success_rate",
		ServersActive:             "gym_servers_active",
		RolloutCompleted:          "gym_rollout_completed_total",
		VerifyCalls:               "gym_verify_calls_total",
		ConcurrencyLimit:          "gym_concurrency_limit_ratio",
		ConcurrencyActive:         "gym_concurrency_active",
		HTTPRetries:               "gym_http_retry_total",
		HTTPServerRequestDuration: "http_server_request_duration_seconds",
		GenAITokenUsage:           "gen_ai_client_token_usage",
	} {
		if got := MustLookup(name).PrometheusName(); got != want {
			t.Errorf("%s: PrometheusName = %q, want %q", name, got, want)
		}
	}
}

func TestClientSpanName(t *testing.T) {
	for in, want := range map[string]string{"POST": "HTTP POST", "get": "HTTP GET", "GET": "HTTP GET", "Patch": "HTTP PATCH"} {
		if got := ClientSpanName(in); got != want {
			t.Errorf("ClientSpanName(%q) = %q, want %q", in, got, want)
		}
	}
}
