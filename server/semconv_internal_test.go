package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

// The parsing of OTEL_SEMCONV_STABILITY_OPT_IN, item by item as Python's
// _OpenTelemetrySemanticConventionStability reads it (opentelemetry-
// instrumentation 0.59b0, _semconv.py).
func TestParseSemconvOptIn(t *testing.T) {
	oldOnly := httpConventions{old: true}
	newOnly := httpConventions{new: true}
	both := httpConventions{old: true, new: true}
	for _, c := range []struct {
		value string
		want  httpConventions
	}{
		{"http", newOnly},
		{" http ", newOnly},
		{"database,http", newOnly},
		{"database , http , gen_ai_latest_experimental", newOnly},
		{"http/dup", both},
		{"http,http/dup", both},
		{"http/dup,http", both},
		{"\thttp/dup\n,database/dup", both},
		{"database", oldOnly},
		{"database/dup", oldOnly},
		{"gen_ai_latest_experimental", oldOnly},
		{"HTTP", oldOnly},     // items compare exactly
		{"Http/Dup", oldOnly}, // likewise
		{"http/dupe", oldOnly},
		{"httpx", oldOnly},
		{"http;http/dup", oldOnly}, // commas separate, nothing else
		{",", oldOnly},
		{"", oldOnly}, // never reached through lens: blank counts as unset there
	} {
		if got := parseSemconvOptIn(c.value); got != c.want {
			t.Errorf("parseSemconvOptIn(%q) = %+v, want %+v", c.value, got, c.want)
		}
	}
}

// The setting is a row of lens's table: unset (or blank) it is "http",
// new conventions only; set by environment or by an overlay (the YAML
// telemetry block), its value is parsed as above, the environment winning.
func TestConventionsOfConfig(t *testing.T) {
	var row *lens.Setting
	for _, s := range lens.Settings() {
		if s.Key == lens.KeySemconvStabilityOptIn {
			row = &s
		}
	}
	if row == nil || !row.Standard || row.Default != semconvHTTP {
		t.Fatalf("lens setting %s = %+v, want a standard variable defaulting to %q", lens.KeySemconvStabilityOptIn, row, semconvHTTP)
	}
	for _, c := range []struct {
		name    string
		env     map[string]string
		overlay map[string]string
		want    httpConventions
	}{
		{"unset", nil, nil, httpConventions{new: true}},
		{"blank env", map[string]string{lens.KeySemconvStabilityOptIn: "  "}, nil, httpConventions{new: true}},
		{"env http/dup", map[string]string{lens.KeySemconvStabilityOptIn: "http/dup"}, nil, httpConventions{old: true, new: true}},
		{"env without http", map[string]string{lens.KeySemconvStabilityOptIn: "database"}, nil, httpConventions{old: true}},
		{"overlay http/dup", nil, map[string]string{lens.KeySemconvStabilityOptIn: "http/dup"}, httpConventions{old: true, new: true}},
		{"env over overlay", map[string]string{lens.KeySemconvStabilityOptIn: "http"},
			map[string]string{lens.KeySemconvStabilityOptIn: "http/dup"}, httpConventions{new: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := lens.LoadConfig(lens.LoadOptions{
				Lookup:  testenv.Lookup(c.env),
				Overlay: c.overlay,
			})
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if got := conventionsOf(cfg); got != c.want {
				src, _ := cfg.Source(lens.KeySemconvStabilityOptIn)
				t.Errorf("conventionsOf = %+v, want %+v (source %+v)", got, c.want, src)
			}
		})
	}
	if got := conventionsOf(lens.Config{}); got != (httpConventions{new: true}) {
		t.Errorf("conventionsOf(zero Config) = %+v, want new only", got)
	}
}

// The old histogram records whole milliseconds, rounded as Python's round()
// rounds (half to even): the expected values are what
// round(seconds * 1000) gives in CPython.
func TestOldDurationMS(t *testing.T) {
	for seconds, want := range map[float64]float64{
		0.0005: 0, 0.0015: 2, 0.0025: 2, 0.0035: 4, 0.0004: 0, 0.0006: 1, 1.2344: 1234, 2: 2000, -0.01: 0,
	} {
		if got := oldDurationMS(seconds); got != want {
			t.Errorf("oldDurationMS(%v) = %v, want %v", seconds, got, want)
		}
	}
}

// Origins are interned per local address and Host header, at most
// maxOrigins of them; further ones share the overflow origin and are not
// stored.
func TestOriginTable(t *testing.T) {
	var tab originTable
	req := func(host string, local net.Addr) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		if local != nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
		}
		return r
	}
	v4 := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8000} // 16-byte form, as a dual-stack listener has it
	o := tab.lookup(req("gym.example:8000", v4))
	if o.host != "10.0.0.5:8000" || o.port != 8000 || o.serverName != "gym.example:8000" {
		t.Errorf("origin %+v, want host 10.0.0.5:8000, port 8000, server name gym.example:8000", o)
	}
	if again := tab.lookup(req("gym.example:8000", v4)); again != o {
		t.Errorf("the same origin was built twice: %p %p", o, again)
	}
	// Port 80 is left out of http.host; IPv6 is spelled without brackets,
	// as the ASGI instrumentation joins its server tuple.
	if o := tab.lookup(req("h", &net.TCPAddr{IP: net.ParseIP("::1"), Port: 80})); o.host != "::1" || o.port != 80 {
		t.Errorf("origin %+v, want host ::1 and port 80", o)
	}
	if o := tab.lookup(req("", nil)); o.host != "" || o.port != 0 || o.serverName != "" {
		t.Errorf("origin without a connection or Host %+v, want nothing known", o)
	}
	for i := 0; tab.size() < maxOrigins; i++ {
		if o := tab.lookup(req(fmt.Sprintf("h%d", i), v4)); o == overflowOrigin {
			t.Fatalf("overflow after %d origins", tab.size())
		}
	}
	for i := range 10 {
		if o := tab.lookup(req(fmt.Sprintf("past-the-cap-%d", i), v4)); o != overflowOrigin {
			t.Errorf("origin %d past the cap = %+v, want the overflow origin", i, o)
		}
	}
	if tab.size() != maxOrigins {
		t.Errorf("%d origins stored, want the cap %d", tab.size(), maxOrigins)
	}
	if overflowOrigin.host != contract.Other || overflowOrigin.serverName != contract.Other {
		t.Errorf("overflow origin %+v, want %s", overflowOrigin, contract.Other)
	}
}

func (o *originTable) size() int { return o.m.Len() }
