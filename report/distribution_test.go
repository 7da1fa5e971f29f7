package report

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// section returns the block of a text report that starts with the line
// beginning with title, up to the next blank line.
func section(t *testing.T, report, title string) string {
	t.Helper()
	i := strings.Index(report, "\n"+title)
	if i < 0 {
		t.Fatalf("report has no section %q:\n%s", title, report)
	}
	block := report[i+1:]
	if j := strings.Index(block, "\n\n"); j >= 0 {
		block = block[:j+1]
	}
	return block
}

// With spans in the run, the percentiles are the spans', exact, and the
// report says so; the bucket estimate is not shown as a percentile.
func TestPercentilesFromSpansFirst(t *testing.T) {
	run := loadFixture(t)
	out := render(t, run, goldenOptions)
	for _, c := range []struct {
		title, metric, span string
		agents              bool
	}{
		{"Rollout duration", contract.RolloutDuration, contract.SpanRollout, true},
		{"Verify duration", contract.VerifyDuration, contract.SpanVerify, false},
	} {
		d := run.Distribution(c.metric, c.span, c.agents)
		spans := run.SpanDurations(c.span, c.agents)
		if d.Source != FromSpans || len(spans) == 0 {
			t.Fatalf("%s: source %v with %d spans, want the spans", c.title, d.Source, len(spans))
		}
		for i, q := range ReportQuantiles {
			if want := durationMS(DurationQuantile(spans, q)); d.Quantiles[i] != want {
				t.Errorf("%s %s = %v, the spans' nearest rank is %v", c.title, quantileName(q), d.Quantiles[i], want)
			}
		}
		block := section(t, out, c.title)
		lines := strings.Split(block, "\n")
		wantHead := c.title + "  (percentiles from " + c.span + " spans, exact)"
		wantLine := "    p50 " + fmtDuration(DurationQuantile(spans, 0.5)) + "  p90 " + fmtDuration(DurationQuantile(spans, 0.9)) +
			"  p99 " + fmtDuration(DurationQuantile(spans, 0.99)) + "  max " + fmtDuration(spans[len(spans)-1])
		if len(lines) < 3 || lines[0] != wantHead || lines[2] != wantLine {
			t.Errorf("%s section starts\n%s\nwant %q, then the span count, then %q", c.title, block, wantHead, wantLine)
		}
		if strings.Contains(block, "~") || strings.Contains(block, "resolution") {
			t.Errorf("%s: a bucket estimate is shown although spans were exported:\n%s", c.title, block)
		}
		h := d.Histogram
		if want := "  histogram " + c.metric + ": " + fmtCount(float64(h.Count)) + " values at the last export\n"; !strings.Contains(block, want) {
			t.Errorf("%s section lacks %q:\n%s", c.title, want, block)
		}
	}
	page := renderHTML(t, run, HTMLOptions{})
	for _, want := range []string{"Percentiles from gym.rollout spans, exact.", "<td>gym.rollout spans (exact)</td>",
		"<td>gym.verify spans (exact)</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "(estimate)</td>") {
		t.Error("page shows a bucket estimate although spans were exported")
	}
}

// dropSpans removes every span line from the run directory's telemetry
// files, as when the spans went to a collector or were sampled away.
func dropSpans(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, contract.RunTelemetryDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("telemetry files: %v %v", files, err)
	}
	for _, f := range files {
		editFile(t, dir, filepath.Join(contract.RunTelemetryDir, filepath.Base(f)), func(s string) string {
			var keep []string
			for _, l := range strings.SplitAfter(s, "\n") {
				if !strings.HasPrefix(l, `{"type":"span"`) {
					keep = append(keep, l)
				}
			}
			return strings.Join(keep, "")
		})
	}
}

// Without spans, the percentiles are estimated from the histogram's
// buckets, marked as estimates, with the bucket each lies in.
func TestPercentilesFromBucketsWithoutSpans(t *testing.T) {
	dir := copyFixture(t)
	dropSpans(t, dir)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if run.SpanCount() != 0 {
		t.Fatalf("%d spans left", run.SpanCount())
	}
	out := render(t, run, goldenOptions)
	d := run.Distribution(contract.RolloutDuration, contract.SpanRollout, true)
	h := d.Histogram
	if d.Source != FromBuckets || h == nil || h.Count != 12 {
		t.Fatalf("source %v, histogram %+v; want the bucket estimate of 12 rollouts", d.Source, h)
	}
	for i, q := range ReportQuantiles {
		if d.Quantiles[i] != h.Quantile(q) {
			t.Errorf("%s = %v, the bucket estimate is %v", quantileName(q), d.Quantiles[i], h.Quantile(q))
		}
	}
	block := section(t, out, "Rollout duration")
	for _, want := range []string{
		"Rollout duration  (percentiles estimated from gym.rollout.duration_ms buckets)\n",
		"  no gym.rollout spans exported; estimated from gym.rollout.duration_ms buckets, 12 values at the last export:\n",
		"    p50 ~" + fmtMS(h.Quantile(0.5)) + "  p90 ~" + fmtMS(h.Quantile(0.9)) + "  p99 ~" + fmtMS(h.Quantile(0.99)) + "  max " + fmtMS(h.Max) + "\n",
		// The fixture's rollouts took about 120 ms, all in one bucket.
		"    resolution: each estimate lies somewhere in its bucket: p50, p90, p99 in " + bucketLabel(h.Bounds, d.Buckets[0]) + " ms\n",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("Rollout duration section lacks %q:\n%s", want, block)
		}
	}
	page := renderHTML(t, run, HTMLOptions{})
	for _, want := range []string{"Percentiles estimated from gym.rollout.duration_ms buckets.",
		"<td>gym.rollout.duration_ms buckets, last export (estimate)</td>", ">~" + fmtMS(h.Quantile(0.5)) + "<",
		"Resolution: each estimate lies somewhere in its bucket", "No <code>gym.rollout</code> spans exported."} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// sdkHistogram records values, in ms, into a histogram of a real SDK
// pipeline that sets no boundaries (as NeMo Gym's gym.* histograms do)
// and returns the collected metric as a telemetry file holds it.
func sdkHistogram(t *testing.T, name string, values []float64, at int64) telfile.Metric {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	in := contract.MustLookup(name)
	hist, err := provider.Meter(contract.MeterScope).Float64Histogram(name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		hist.Record(context.Background(), v)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) != 1 {
		t.Fatalf("collected %+v", rm.ScopeMetrics)
	}
	m := rm.ScopeMetrics[0].Metrics[0]
	data, ok := m.Data.(metricdata.Histogram[float64])
	if !ok || len(data.DataPoints) != 1 {
		t.Fatalf("collected %T %+v", m.Data, m.Data)
	}
	dp := data.DataPoints[0]
	minV, _ := dp.Min.Value()
	maxV, _ := dp.Max.Value()
	lo, hi := telfile.FloatNumber(minV), telfile.FloatNumber(maxV)
	return telfile.Metric{TimeNS: at, Scope: contract.MeterScope, Name: m.Name, Unit: m.Unit, Kind: telfile.MetricHistogram,
		Temporality: telfile.TemporalityCumulative, Points: []telfile.Point{{
			Attributes: map[string]any{}, StartNS: 1, TimeNS: at, Count: dp.Count, Sum: telfile.FloatNumber(dp.Sum),
			Min: &lo, Max: &hi, Bounds: dp.Bounds, Counts: dp.BucketCounts,
		}}}
}

// writeRecords writes a telemetry file of the run directory dir: a
// resource header naming the server, then the entries.
func writeRecords(t *testing.T, dir, file, serverType string, entries ...telfile.Entry) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, contract.RunTelemetryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	buf, err := telfile.AppendLine(nil, telfile.Resource{Format: telfile.FormatVersion, TimeNS: 1,
		Attributes: map[string]any{contract.AttrServerName: strings.TrimSuffix(file, ".jsonl"), contract.AttrServerType: serverType}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if buf, err = telfile.AppendLine(buf, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, contract.RunTelemetryDir, file), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The gym.* histograms export the SDK's default buckets (0 .. 10000 ms),
// which the report reads from the data: each estimate lies in the bucket
// holding the exact nearest-rank value, and one above 10 s is said to be
// in the overflow bucket.
func TestPercentilesFromDefaultBuckets(t *testing.T) {
	values := []float64{3, 40, 60, 80, 90, 120, 300, 800, 4000, 12000}
	m := sdkHistogram(t, contract.RolloutDuration, values, int64(2*time.Second))
	if !slices.Equal(m.Points[0].Bounds, contract.DefaultBucketsMS) {
		t.Fatalf("the SDK's default bounds are %v, contract.DefaultBucketsMS %v", m.Points[0].Bounds, contract.DefaultBucketsMS)
	}
	dir := t.TempDir()
	writeRecords(t, dir, "simple_agent.jsonl", contract.ServerTypeAgent, m)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := run.Distribution(contract.RolloutDuration, contract.SpanRollout, true)
	if d.Source != FromBuckets || d.Max != 12000 {
		t.Fatalf("source %v, max %v; want the bucket estimate with max 12000", d.Source, d.Max)
	}
	sorted := slices.Sorted(slices.Values(values))
	bounds := contract.DefaultBucketsMS
	for i, q := range ReportQuantiles {
		exact := sorted[int(math.Ceil(q*float64(len(sorted))))-1]
		b := d.Buckets[i]
		lo, hi := math.Inf(-1), math.Inf(1)
		if b > 0 {
			lo = bounds[b-1]
		}
		if b < len(bounds) {
			hi = bounds[b]
		}
		if !(lo < exact && exact <= hi) {
			t.Errorf("%s: estimate %v in bucket %d (%v, %v], but the exact value %v is not", quantileName(q), d.Quantiles[i], b, lo, hi, exact)
		}
		if !(lo <= d.Quantiles[i] && d.Quantiles[i] <= math.Min(hi, d.Max)) {
			t.Errorf("%s: estimate %v outside its bucket (%v, %v]", quantileName(q), d.Quantiles[i], lo, hi)
		}
	}
	out := render(t, run, goldenOptions)
	block := section(t, out, "Rollout duration")
	for _, want := range []string{
		"    resolution: each estimate lies somewhere in its bucket: p50 in (75, 100] ms; p90 in (2500, 5000] ms; " +
			"p99 in the overflow bucket > 10000 ms (only the maximum bounds it)\n",
		// The bars run from the first non-empty bucket to the last.
		"  buckets:\n    (0, 5] ms ",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("Rollout duration section lacks %q:\n%s", want, block)
		}
	}
	if !strings.Contains(block, "> 10000 ms") {
		t.Errorf("the bars lack the overflow bucket:\n%s", block)
	}
}

// A run with neither spans nor a histogram says both are missing.
func TestPercentilesFromNothing(t *testing.T) {
	run := Run{ID: "empty"}
	d := run.Distribution(contract.RolloutDuration, contract.SpanRollout, true)
	if d.Source != FromNothing || !math.IsNaN(d.Quantiles[0]) || !math.IsNaN(d.Max) {
		t.Errorf("empty run: %+v", d)
	}
	block := section(t, render(t, run, TextOptions{}), "Rollout duration")
	for _, want := range []string{"no gym.rollout spans exported", "histogram gym.rollout.duration_ms not exported"} {
		if !strings.Contains(block, want) {
			t.Errorf("empty run's section lacks %q:\n%s", want, block)
		}
	}
}
