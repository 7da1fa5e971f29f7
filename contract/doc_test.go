package contract_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/runtime"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
)

// metricsDoc is the page that lists every instrument of the contract.
const metricsDoc = "../docs/observability/metrics.md"

// The headings whose first table the tests read.
const (
	catalogueHeading = "## Every instrument"
	runtimeHeading   = "### Go runtime metrics"
)

// removedNames are instrument names the page may still mention, as gone.
var removedNames = []string{"gym.rollout.calls"}

// targetLabels are the labels the orchestrator's file_sd targets add; they
// look like series names but are not.
var targetLabels = []string{"gym_server_name", "gym_server_type", "gym_run_id", "http_server_name"}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatalf("read the metrics page: %v", err)
	}
	return string(b)
}

// table is one Markdown table: its header cells and its rows, each with
// the line it is on.
type table struct {
	header []string
	rows   []row
}

type row struct {
	line  int
	cells []string
}

// col returns the index of the header cell named name, or -1.
func (t table) col(name string) int { return slices.Index(t.header, name) }

// firstTableAfter returns the first table that follows the line heading.
func firstTableAfter(doc, heading string) (table, error) {
	lines := strings.Split(doc, "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		return table{}, fmt.Errorf("no heading %q", heading)
	}
	var tb table
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "|") {
			if tb.header != nil {
				break
			}
			if strings.HasPrefix(l, "#") {
				return table{}, fmt.Errorf("no table under %q", heading)
			}
			continue
		}
		cells := splitCells(l)
		switch {
		case tb.header == nil:
			tb.header = cells
		case strings.Trim(l, "|-: ") == "":
			// The delimiter row.
		default:
			tb.rows = append(tb.rows, row{line: i + 1, cells: cells})
		}
	}
	if tb.header == nil {
		return table{}, fmt.Errorf("no table under %q", heading)
	}
	return tb, nil
}

// splitCells splits one table line into trimmed cells; "\|" is a pipe
// inside a cell.
func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// code returns the text of s when s is exactly one `code span`.
func code(s string) (string, bool) {
	if len(s) < 2 || s[0] != '`' || s[len(s)-1] != '`' || strings.Count(s, "`") != 2 {
		return "", false
	}
	return s[1 : len(s)-1], true
}

// Cells as the page writes them, from an instrument of the package.

func kindCell(in contract.Instrument) string {
	k := in.Kind.String()
	if in.Observed {
		k = "observable " + k
	}
	if in.Float {
		return k + " (float64)"
	}
	return k + " (int64)"
}

func unitCell(unit string) string {
	if unit == "" {
		return "none"
	}
	return "`" + unit + "`"
}

func attrsCell(attrs []string) string {
	if len(attrs) == 0 {
		return "none"
	}
	return "`" + strings.Join(attrs, "`, `") + "`"
}

// bucketSets names the boundary sets the page shows, as the Buckets
// column names them.
var bucketSets = []struct {
	name   string
	bounds []float64
}{
	{"SDK default", contract.DefaultBucketsMS},
	{"HTTP (s)", contract.HTTPDurationBucketsS},
	{"GenAI (s)", contract.GenAIDurationBucketsS},
	{"GenAI tokens", contract.GenAITokenBuckets},
}

func bucketsCell(in contract.Instrument) (string, error) {
	if in.Kind != contract.Histogram {
		return "—", nil
	}
	if in.Boundaries == nil {
		return "SDK default", nil
	}
	for _, s := range bucketSets {
		if slices.Equal(s.bounds, in.Boundaries) {
			return s.name, nil
		}
	}
	return "", fmt.Errorf("%s: its boundaries are no set the page names; add one to bucketSets and the page", in.Name)
}

// catalogueColumns are the catalogue table's columns, in order.
var catalogueColumns = []string{"Instrument", "Prometheus name", "Kind", "Unit", "Buckets", "Attributes", "Source", "Written by"}

// checkCatalogue returns what is wrong with the page's catalogue table
// against ins: every instrument once, with the package's Prometheus name,
// kind, unit, buckets, attributes and source, a writer named, and no row
// the package does not have.
func checkCatalogue(doc string, ins []contract.Instrument) []string {
	tb, err := firstTableAfter(doc, catalogueHeading)
	if err != nil {
		return []string{err.Error()}
	}
	if !slices.Equal(tb.header, catalogueColumns) {
		return []string{fmt.Sprintf("catalogue columns are %q, want %q", tb.header, catalogueColumns)}
	}
	var bad []string
	badf := func(line int, format string, args ...any) {
		bad = append(bad, fmt.Sprintf("%s:%d: %s", metricsDoc, line, fmt.Sprintf(format, args...)))
	}
	byName := map[string]contract.Instrument{}
	for _, in := range ins {
		byName[in.Name] = in
	}
	seen := map[string]int{}
	for _, r := range tb.rows {
		if len(r.cells) != len(catalogueColumns) {
			badf(r.line, "%d cells, want %d", len(r.cells), len(catalogueColumns))
			continue
		}
		name, ok := code(r.cells[0])
		if !ok {
			badf(r.line, "the instrument cell %q is not one `name`", r.cells[0])
			continue
		}
		if prev, dup := seen[name]; dup {
			badf(r.line, "%s listed twice (first on line %d)", name, prev)
			continue
		}
		seen[name] = r.line
		in, ok := byName[name]
		if !ok {
			badf(r.line, "%s is not an instrument of contract.Instruments()", name)
			continue
		}
		buckets, err := bucketsCell(in)
		if err != nil {
			badf(r.line, "%v", err)
		}
		for _, c := range []struct{ col, got, want string }{
			{"Prometheus name", r.cells[1], "`" + in.PrometheusName() + "`"},
			{"Kind", r.cells[2], kindCell(in)},
			{"Unit", r.cells[3], unitCell(in.Unit)},
			{"Buckets", r.cells[4], buckets},
			{"Attributes", r.cells[5], attrsCell(in.Attrs)},
			{"Source", r.cells[6], in.Source.String()},
		} {
			if c.got != c.want {
				badf(r.line, "%s: %s is %q, the package says %q", name, c.col, c.got, c.want)
			}
		}
		if r.cells[7] == "" {
			badf(r.line, "%s: nobody named as its writer", name)
		}
	}
	for _, in := range ins {
		if _, ok := seen[in.Name]; !ok {
			bad = append(bad, fmt.Sprintf("%s: %s (%s) is missing from the catalogue table", metricsDoc, in.Name, in.PrometheusName()))
		}
	}
	return bad
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// dottedName is what an instrument name of the contract looks like.
	dottedName = regexp.MustCompile(`^(gym|gen_ai\.client|http\.server)\.[a-z0-9_.*]+$`)
	// seriesName is what a Prometheus series of the contract looks like,
	// anywhere on the page (PromQL included).
	seriesName = regexp.MustCompile(`\b(gym|gen_ai_client|http_server)_[a-z0-9_]+`)
)

// checkNames returns the names on the whole page that look like the
// contract's but are not: an instrument, span or series name the package
// does not have.
func checkNames(doc string, ins []contract.Instrument) []string {
	known := map[string]bool{}
	series := map[string]bool{}
	for _, in := range ins {
		known[in.Name] = true
		p := in.PrometheusName()
		series[p] = true
		if in.Kind == contract.Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				series[p+s] = true
			}
		}
	}
	for _, n := range []string{contract.SpanJob, contract.SpanRollout, contract.SpanVerify,
		contract.SpanAgentResponses, contract.SpanModelResponses, contract.SpanModelChatCompletions} {
		known[n] = true
	}
	for _, n := range removedNames {
		known[n] = true
	}
	for _, l := range targetLabels {
		series[l] = true
	}
	var bad []string
	for i, line := range strings.Split(doc, "\n") {
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			n := m[1]
			if !dottedName.MatchString(n) || known[n] {
				continue
			}
			if prefix, ok := strings.CutSuffix(n, "*"); ok && slices.ContainsFunc(ins, func(in contract.Instrument) bool {
				return strings.HasPrefix(in.Name, prefix)
			}) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s:%d: `%s` names no instrument or span of the package", metricsDoc, i+1, n))
		}
		for _, n := range seriesName.FindAllString(line, -1) {
			if !series[n] {
				bad = append(bad, fmt.Sprintf("%s:%d: %s is no series of the package's instruments", metricsDoc, i+1, n))
			}
		}
	}
	return bad
}

func TestMetricsDocListsEveryInstrument(t *testing.T) {
	for _, p := range checkCatalogue(readDoc(t), contract.Instruments()) {
		t.Error(p)
	}
}

func TestMetricsDocNamesOnlyWhatThePackageHas(t *testing.T) {
	for _, p := range checkNames(readDoc(t), contract.Instruments()) {
		t.Error(p)
	}
}

func TestMetricsDocShowsEveryBucketSet(t *testing.T) {
	doc := readDoc(t)
	for _, s := range bucketSets {
		words := make([]string, len(s.bounds))
		for i, b := range s.bounds {
			words[i] = strconv.FormatFloat(b, 'f', -1, 64)
		}
		if line := strings.Join(words, ", "); !strings.Contains(doc, "\n"+line+"\n") {
			t.Errorf("the page does not show the %s boundaries as the line %q", s.name, line)
		}
	}
}

// TestDocChecksCatchMismatches breaks the real page the ways a stale page
// is broken and requires the checks to notice each.
func TestDocChecksCatchMismatches(t *testing.T) {
	doc := readDoc(t)
	ins := contract.Instruments()
	if p := append(checkCatalogue(doc, ins), checkNames(doc, ins)...); len(p) > 0 {
		t.Fatalf("the page is not clean to start with: %q", p)
	}
	rowOf := func(name string) string {
		for _, l := range strings.Split(doc, "\n") {
			if strings.HasPrefix(l, "| `"+name+"` |") {
				return l
			}
		}
		t.Fatalf("no row for %s", name)
		return ""
	}
	verifyCalls := rowOf(contract.VerifyCalls)
	completed := rowOf(contract.RolloutCompleted)
	for _, c := range []struct {
		name string
		doc  string
		ins  []contract.Instrument
	}{
		{"a row removed", strings.Replace(doc, verifyCalls+"\n", "", 1), ins},
		{"a row twice", strings.Replace(doc, verifyCalls+"\n", verifyCalls+"\n"+verifyCalls+"\n", 1), ins},
		{"a stale Prometheus name", strings.Replace(doc, verifyCalls, strings.Replace(verifyCalls, "`gym_verify_calls_total`", "`gym_verify_calls`", 1), 1), ins},
		{"a stale unit", strings.Replace(doc, completed, strings.Replace(completed, "| `1` |", "| `{rollout}` |", 1), 1), ins},
		{"a stale kind", strings.Replace(doc, completed, strings.Replace(completed, "| counter (int64) |", "| observable counter (int64) |", 1), 1), ins},
		{"a stale attribute", strings.Replace(doc, completed, strings.Replace(completed, "`nemo.gym.rollout.outcome`", "`nemo.gym.outcome`", 1), 1), ins},
		{"a row the package lacks", strings.Replace(doc, completed, completed+"\n"+strings.ReplaceAll(completed, "completed_total", "started_total"), 1), ins},
		{"an instrument the page lacks", doc, append(slices.Clone(ins), contract.Instrument{
			Name: "gym.new.thing_total", Kind: contract.Counter, Unit: "1", Source: contract.SourceGymlens})},
		{"a stale series in PromQL", strings.Replace(doc, "rate(gym_rollout_completed_total[5m])", "rate(gym_rollout_calls_total[5m])", 1), ins},
		{"a stale name in prose", doc + "\nSee `gym.rollout.started`.\n", ins},
	} {
		if c.doc == doc && len(c.ins) == len(ins) {
			t.Fatalf("%s: the page was not changed", c.name)
		}
		if p := append(checkCatalogue(c.doc, c.ins), checkNames(c.doc, c.ins)...); len(p) == 0 {
			t.Errorf("%s: not noticed", c.name)
		} else {
			t.Logf("%s: %s", c.name, p[0])
		}
	}
}

// promType is the Prometheus type the exporter gives an instrument.
func promType(k contract.Kind) string {
	switch k {
	case contract.Histogram:
		return "HISTOGRAM"
	case contract.Counter:
		return "COUNTER"
	}
	return "GAUGE"
}

// create makes in on m as the package describes it and records one value.
func create(ctx context.Context, m metric.Meter, in contract.Instrument) error {
	var err error
	switch {
	case in.Kind == contract.Histogram && in.Float:
		var h metric.Float64Histogram
		if h, err = m.Float64Histogram(in.Name, metric.WithUnit(in.Unit)); err == nil {
			h.Record(ctx, 1)
		}
	case in.Kind == contract.Histogram:
		var h metric.Int64Histogram
		if h, err = m.Int64Histogram(in.Name, metric.WithUnit(in.Unit)); err == nil {
			h.Record(ctx, 1)
		}
	case in.Observed && in.Float && in.Kind == contract.Gauge:
		_, err = m.Float64ObservableGauge(in.Name, metric.WithUnit(in.Unit),
			metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error { o.Observe(1); return nil }))
	case in.Observed && in.Kind == contract.Gauge:
		_, err = m.Int64ObservableGauge(in.Name, metric.WithUnit(in.Unit),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error { o.Observe(1); return nil }))
	case in.Observed && in.Kind == contract.Counter:
		_, err = m.Int64ObservableCounter(in.Name, metric.WithUnit(in.Unit),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error { o.Observe(1); return nil }))
	case in.Observed && in.Kind == contract.UpDownCounter:
		_, err = m.Int64ObservableUpDownCounter(in.Name, metric.WithUnit(in.Unit),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error { o.Observe(1); return nil }))
	case in.Kind == contract.Counter:
		var c metric.Int64Counter
		if c, err = m.Int64Counter(in.Name, metric.WithUnit(in.Unit)); err == nil {
			c.Add(ctx, 1)
		}
	case in.Kind == contract.UpDownCounter:
		var c metric.Int64UpDownCounter
		if c, err = m.Int64UpDownCounter(in.Name, metric.WithUnit(in.Unit)); err == nil {
			c.Add(ctx, 1)
		}
	case in.Kind == contract.Gauge && in.Float:
		var g metric.Float64Gauge
		if g, err = m.Float64Gauge(in.Name, metric.WithUnit(in.Unit)); err == nil {
			g.Record(ctx, 1)
		}
	case in.Kind == contract.Gauge:
		var g metric.Int64Gauge
		if g, err = m.Int64Gauge(in.Name, metric.WithUnit(in.Unit)); err == nil {
			g.Record(ctx, 1)
		}
	default:
		err = fmt.Errorf("no way to create a %s", in.Kind)
	}
	return err
}

// family is what the tests read of one gathered Prometheus family.
type family struct {
	typ    string
	scopes []string // the otel_scope_name label of each series
}

// gather returns the families a Prometheus registry holds by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]family {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{typ: mf.GetType().String()}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "otel_scope_name" {
					f.scopes = append(f.scopes, l.GetValue())
				}
			}
		}
		out[mf.GetName()] = f
	}
	return out
}

// newPrometheus returns a meter provider exporting to a fresh registry
// through the OpenTelemetry Prometheus exporter with its defaults.
func newPrometheus(t *testing.T) (*sdkmetric.MeterProvider, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatalf("prometheus exporter: %v", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, reg
}

// TestPrometheusNamesMatchTheExporter holds Instrument.PrometheusName,
// which the page shows, to what the Prometheus exporter really exports
// for each instrument of the catalogue.
func TestPrometheusNamesMatchTheExporter(t *testing.T) {
	ctx := context.Background()
	mp, reg := newPrometheus(t)
	m := mp.Meter(contract.MeterScope)
	for _, in := range contract.Instruments() {
		if err := create(ctx, m, in); err != nil {
			t.Fatalf("%s: %v", in.Name, err)
		}
	}
	got := gather(t, reg)
	for _, in := range contract.Instruments() {
		mf, ok := got[in.PrometheusName()]
		if !ok {
			var names []string
			for n := range got {
				if strings.HasPrefix(n, strings.ReplaceAll(in.Name, ".", "_")) {
					names = append(names, n)
				}
			}
			t.Errorf("%s: PrometheusName %q, the exporter exports %q", in.Name, in.PrometheusName(), names)
			continue
		}
		if mf.typ != promType(in.Kind) {
			t.Errorf("%s: exported as a %s, want %s", in.Name, mf.typ, promType(in.Kind))
		}
		if len(mf.scopes) == 0 || slices.ContainsFunc(mf.scopes, func(s string) bool { return s != contract.MeterScope }) {
			t.Errorf("%s: otel_scope_name %q, want %q on every series", in.Name, mf.scopes, contract.MeterScope)
		}
	}
}

// TestMetricsDocGoRuntimeTable holds the page's Go runtime table to what
// the runtime instrumentation really reports: every metric once, with its
// kind, unit and Prometheus name.
func TestMetricsDocGoRuntimeTable(t *testing.T) {
	tb, err := firstTableAfter(readDoc(t), runtimeHeading)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Instrument", "Prometheus name", "Kind", "Unit", "Meaning"}
	if !slices.Equal(tb.header, want) {
		t.Fatalf("runtime table columns are %q, want %q", tb.header, want)
	}
	// go.memory.limit is reported only under a limit; set one for the
	// test (far above what the test uses) and put the old one back.
	old := debug.SetMemoryLimit(1 << 50)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })

	reader := sdkmetric.NewManualReader()
	mp, reg := newPrometheus(t)
	mpManual := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mpManual.Shutdown(context.Background()) })
	if err := runtime.Start(runtime.WithMeterProvider(mpManual)); err != nil {
		t.Fatalf("runtime.Start: %v", err)
	}
	if err := runtime.Start(runtime.WithMeterProvider(mp)); err != nil {
		t.Fatalf("runtime.Start: %v", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	families := gather(t, reg)

	type fact struct{ kind, unit string }
	reported := map[string]fact{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != runtime.ScopeName {
			continue
		}
		for _, md := range sm.Metrics {
			kind := "unknown"
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				kind = "observable up-down counter (int64)"
				if d.IsMonotonic {
					kind = "observable counter (int64)"
				}
			case metricdata.Gauge[int64]:
				kind = "observable gauge (int64)"
			}
			reported[md.Name] = fact{kind, md.Unit}
		}
	}
	if len(reported) == 0 {
		t.Fatal("the runtime instrumentation reported nothing")
	}
	listed := map[string]bool{}
	for _, r := range tb.rows {
		if len(r.cells) != len(want) {
			t.Errorf("%s:%d: %d cells, want %d", metricsDoc, r.line, len(r.cells), len(want))
			continue
		}
		name, _ := code(r.cells[0])
		f, ok := reported[name]
		if !ok {
			t.Errorf("%s:%d: %q is not reported by the runtime instrumentation", metricsDoc, r.line, r.cells[0])
			continue
		}
		if listed[name] {
			t.Errorf("%s:%d: %s listed twice", metricsDoc, r.line, name)
		}
		listed[name] = true
		if r.cells[2] != f.kind {
			t.Errorf("%s:%d: %s: kind %q, reported as %q", metricsDoc, r.line, name, r.cells[2], f.kind)
		}
		if r.cells[3] != unitCell(f.unit) {
			t.Errorf("%s:%d: %s: unit %s, reported as %q", metricsDoc, r.line, name, r.cells[3], f.unit)
		}
		if p, _ := code(r.cells[1]); families[p].typ == "" {
			t.Errorf("%s:%d: %s: the exporter exports no %s", metricsDoc, r.line, name, r.cells[1])
		}
	}
	for name := range reported {
		if !listed[name] {
			t.Errorf("%s is reported by the runtime instrumentation but not listed", name)
		}
	}
}
