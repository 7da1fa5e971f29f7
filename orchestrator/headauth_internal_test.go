package orchestrator

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Off loopback, NeMo Gym's routes want the token too, unless the config
// opens them; gymlens's want it whatever the config says.
func TestHeadGuardOffLoopback(t *testing.T) {
	const token = "a-token-of-enough-length"
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	for _, c := range []struct {
		host           string
		open, upstream bool
		auth           string
		want           int
	}{
		{"10.1.2.3", false, true, "", http.StatusUnauthorized},
		{"10.1.2.3", false, true, "Bearer " + token, http.StatusOK},
		{"10.1.2.3", true, true, "", http.StatusOK},
		{"10.1.2.3", true, false, "", http.StatusUnauthorized},
		{"0.0.0.0", false, true, "", http.StatusUnauthorized},
		{"gym-host1", false, true, "", http.StatusUnauthorized},
		{"localhost", false, true, "", http.StatusOK},
		{"::1", false, true, "", http.StatusOK},
		{"127.0.0.2", false, false, "", http.StatusUnauthorized},
		{"127.0.0.2", false, false, "Bearer " + token, http.StatusOK},
	} {
		h := newHeadGuard(token, c.host, c.open).guard(c.upstream, ok)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h(w, r)
		if w.Code != c.want {
			t.Errorf("host %s open=%v upstream route=%v auth %q: %d, want %d", c.host, c.open, c.upstream, c.auth, w.Code, c.want)
		}
	}
}

// What the telemetry environment calls secret.
func TestSecretVar(t *testing.T) {
	for _, c := range []struct {
		name, value string
		secret      bool
	}{
		{"OTEL_EXPORTER_OTLP_HEADERS", "a=b", true},
		{"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "a=b", true},
		{"OTEL_EXPORTER_OTLP_CLIENT_KEY", "/etc/key.pem", true},
		{"NEMO_GYM_OTEL_API_TOKEN", "x", true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:p@h:4317", true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317", false},
		{"NEMO_GYM_OTEL_SPAN_GROUPS", "all", false},
		{"OTEL_SERVICE_NAME", "nemo-gym", false},
	} {
		if got := secretVar(c.name, c.value); got != c.secret {
			t.Errorf("secretVar(%s, %s) = %v, want %v", c.name, c.value, got, c.secret)
		}
	}
}
