package lens_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/gymlens/gymlens/lens"
)

// hostIP parses the host of addr as an IP, failing the test when it is not
// an IP literal.
func hostIP(t *testing.T, addr string) net.IP {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		t.Fatalf("address %q: host %q is not an IP", addr, host)
	}
	return ip
}

// TestPrometheusDefaultsToLoopback checks the configuration side: with
// PROMETHEUS_ADDR unset (or blank) the prometheus exporter is configured to
// listen on a loopback address, never on every interface.
func TestPrometheusDefaultsToLoopback(t *testing.T) {
	if ip := hostIP(t, lens.DefaultPrometheusAddr); !ip.IsLoopback() {
		t.Errorf("DefaultPrometheusAddr %q is not loopback", lens.DefaultPrometheusAddr)
	}
	for _, s := range lens.Settings() {
		if s.Key == lens.KeyPrometheusAddr && s.Default != lens.DefaultPrometheusAddr {
			t.Errorf("PROMETHEUS_ADDR defaults to %q in the settings table, not %q", s.Default, lens.DefaultPrometheusAddr)
		}
	}
	for _, blank := range []string{"", "  "} {
		cfg := mustLoad(t, enabledVars(map[string]string{
			"NEMO_GYM_OTEL_EXPORTER":        "prometheus",
			"NEMO_GYM_OTEL_PROMETHEUS_ADDR": blank,
		}))
		if !cfg.HasExporter(lens.ExporterPrometheus) {
			t.Fatalf("exporters %v", cfg.Exporters)
		}
		if ip := hostIP(t, cfg.PrometheusAddr); !ip.IsLoopback() {
			t.Errorf("PROMETHEUS_ADDR=%q: the endpoint would listen on %q, not loopback", blank, cfg.PrometheusAddr)
		}
	}
}

// TestPrometheusBindsWhereTold starts the real endpoint: a loopback
// address binds loopback, and so does an address without a host (":0",
// contract.ListenAddr); every interface must be written out (0.0.0.0).
func TestPrometheusBindsWhereTold(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want func(net.IP) bool
		what string
	}{
		{"127.0.0.1:0", net.IP.IsLoopback, "loopback"},
		{" 127.0.0.1:0 ", net.IP.IsLoopback, "loopback"},
		{":0", net.IP.IsLoopback, "loopback"},
		{"0.0.0.0:0", net.IP.IsUnspecified, "every interface"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			cfg := mustLoad(t, enabledVars(map[string]string{
				"NEMO_GYM_OTEL_EXPORTER":        "prometheus",
				"NEMO_GYM_OTEL_PROMETHEUS_ADDR": tc.addr,
			}))
			h := mustSetup(t, cfg, lens.Options{})
			defer func() {
				if err := h.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			}()
			bound := h.PrometheusAddr()
			if ip := hostIP(t, bound); !tc.want(ip) {
				t.Errorf("PROMETHEUS_ADDR=%q bound %q, want %s", tc.addr, bound, tc.what)
			}
			// Either way the endpoint answers on loopback.
			_, port, _ := net.SplitHostPort(bound)
			transport := &http.Transport{DisableKeepAlives: true}
			defer transport.CloseIdleConnections()
			res, err := (&http.Client{Transport: transport}).Get("http://" + net.JoinHostPort("127.0.0.1", port) + "/metrics")
			if err != nil {
				t.Fatalf("GET /metrics: %v", err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET /metrics: status %d", res.StatusCode)
			}
		})
	}
}
