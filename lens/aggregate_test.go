package lens_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/lens"
)

// recordSome records the same measurements with any Instrumenter: a
// float histogram with the contract's boundaries, an int histogram with
// the default ones, a counter; two attribute sets each.
func recordSome(t *testing.T, in lens.Instrumenter) {
	t.Helper()
	f, err := in.Float64Histogram(contract.ModelCallDuration)
	if err != nil {
		t.Fatal(err)
	}
	i, err := in.Int64Histogram(contract.GenAITokenUsage)
	if err != nil {
		t.Fatal(err)
	}
	c, err := in.Int64Counter(contract.HTTPRetries)
	if err != nil {
		t.Fatal(err)
	}
	a := attribute.NewSet(attribute.String(contract.AttrModelDialect, "responses"), attribute.String(contract.AttrServerName, "policy"))
	b := attribute.NewSet(attribute.String(contract.AttrModelDialect, "chat_completions"), attribute.String(contract.AttrServerName, "judge"))
	for n, v := range []float64{0, 1.5, 5, 99, 250, 12000, 3} {
		f.Bind(a).Record(v)
		if n%2 == 0 {
			f.Bind(b).Record(v * 3)
		}
		i.Bind(a).Record(int64(v) * 10)
	}
	c.Bind(a).Add(2)
	c.Bind(b).Add(5)
	c.Bind(b).Add(1)
}

// samples returns the sample lines of the contract instruments recordSome
// uses, sorted.
func samples(t *testing.T, page string) []string {
	t.Helper()
	var prefixes []string
	for _, name := range []string{contract.ModelCallDuration, contract.GenAITokenUsage, contract.HTTPRetries} {
		prefixes = append(prefixes, contract.MustLookup(name).PrometheusName())
	}
	var out []string
	for line := range strings.Lines(page) {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, strings.TrimSpace(line))
			}
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("no samples of the recorded instruments in:\n%s", page)
	}
	return out
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	transport := &http.Transport{DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// A process's Prometheus page shows the same samples for the same records
// whether lens aggregates them (its own exporter, the default) or the SDK
// does (an SDK meter provider with the Prometheus exporter, no lens).
func TestOwnAggregationServesTheSDKsSamples(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"NEMO_GYM_OTEL_ENABLED":         "on",
		"NEMO_GYM_OTEL_EXPORTER":        "prometheus",
		"NEMO_GYM_OTEL_PROMETHEUS_ADDR": "127.0.0.1:0",
		"NEMO_GYM_OTEL_TRACES_ENABLED":  "0",
	})
	h := mustSetup(t, cfg, lens.Options{})
	defer func() { _ = h.Shutdown(context.Background()) }()
	if !lens.OwnAggregationForTest(h) {
		t.Fatal("lens-built readers with the default aggregation: want lens's own aggregation")
	}
	recordSome(t, h.Instrumenter())
	got := samples(t, scrape(t, "http://"+h.PrometheusAddr()+"/metrics"))

	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	recordSome(t, lens.OnMeter(mp.Meter(contract.MeterScope)))
	sdkURL := servertest.ServeHandler(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	want := samples(t, scrape(t, sdkURL+"/metrics"))

	if !slices.Equal(got, want) {
		t.Fatalf("own aggregation:\n%s\nSDK:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Whatever lens's aggregation cannot do sends the instruments to the SDK.
func TestOwnAggregationFallsBack(t *testing.T) {
	base := enabledVars(nil)
	cases := []struct {
		name string
		vars map[string]string
		opts lens.Options
		env  map[string]string
		want string // "" for lens's own aggregation
	}{
		{name: "defaults"},
		{name: "cumulative asked for", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "Cumulative"}},
		{name: "exemplars off", env: map[string]string{"OTEL_METRICS_EXEMPLAR_FILTER": "always_off"}},
		{name: "caller's reader", opts: lens.Options{MetricReader: sdkmetric.NewManualReader()}, want: "reader"},
		{name: "exponential", vars: map[string]string{lens.KeyHistogramAggregation: lens.HistogramBase2Exponential}, want: lens.KeyHistogramAggregation},
		{name: "boundaries", vars: map[string]string{lens.PrimaryPrefix + lens.KeyHistogramBoundaries: "1,10,100"}, want: lens.KeyHistogramBoundaries},
		{name: "delta", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"}, want: "delta"},
		{name: "exemplars on", env: map[string]string{"OTEL_METRICS_EXEMPLAR_FILTER": "always_on"}, want: "always_on"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{}
			for k, v := range base {
				vars[k] = v
			}
			for k, v := range c.vars {
				vars[k] = v
			}
			got := lens.OwnAggregationReasonForTest(mustLoad(t, vars), c.opts, c.env)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("reason %q, want one naming %q (empty: own aggregation)", got, c.want)
			}
		})
	}
}
