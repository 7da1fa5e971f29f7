package backends

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
	"github.com/gymlens/gymlens/report"
)

// Prometheus's HTTP API: /api/v1/query_range answers a matrix.

type promAnswer struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// maxPoints bounds the samples per series a range query asks for
// (Prometheus refuses more than 11 000).
const maxPoints = 2000

// promRange runs a range query and returns its series.
func (f *fetcher) promRange(ctx context.Context, query string, start, end time.Time, step time.Duration) (promAnswer, error) {
	q := url.Values{
		"query": {query},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', 3, 64)},
	}
	var a promAnswer
	if err := f.getJSON(ctx, f.opts.PrometheusURL+"/api/v1/query_range?"+q.Encode(), &a); err != nil {
		return a, err
	}
	if a.Status != "success" {
		return a, fmt.Errorf("prometheus: %s: %s", query, a.Error)
	}
	return a, nil
}

// stepFor is the resolution of a range query over d: Options.Step, or d
// split into at most maxPoints steps, and never under a second.
func (f *fetcher) stepFor(d time.Duration) time.Duration {
	if f.opts.Step > 0 {
		return f.opts.Step
	}
	step := (d / maxPoints).Round(time.Second)
	return max(step, time.Second)
}

// runSelector is the label matcher of the run's series.
func (f *fetcher) runSelector() string {
	return fmt.Sprintf("%s=%q", promLabel(contract.AttrRunID), f.opts.RunID)
}

// maxExtentStep is the coarsest step promExtent uses: under Prometheus's
// lookback (5 minutes), so no sample falls between two evaluations.
const maxExtentStep = 4 * time.Minute

// promExtent finds when the run's series have samples: a count over
// [Since, Until] at a step under the lookback, so every sample is seen by
// an evaluation at most a step after it. The first sample is then at most
// a step before the first evaluation that sees the run, and the last one
// at or before the last.
func (f *fetcher) promExtent(ctx context.Context) (start, end time.Time, ok bool, err error) {
	d := f.opts.Until.Sub(f.opts.Since)
	step := min(max((d/maxPoints).Round(time.Second), time.Second), maxExtentStep)
	if d/step > 11000 {
		return start, end, false, fmt.Errorf("a search of %s is too long for one range query at a %s step; look back at most %s",
			d, step, 11000*maxExtentStep)
	}
	// One step past Until, so the last evaluation is not before the
	// newest sample.
	a, err := f.promRange(ctx, "count({"+f.runSelector()+"})", f.opts.Since, f.opts.Until.Add(step), step)
	if err != nil {
		return start, end, false, err
	}
	for _, r := range a.Data.Result {
		for _, v := range r.Values {
			t, ok := sampleTime(v[0])
			if !ok {
				continue
			}
			if start.IsZero() || t.Before(start) {
				start = t
			}
			if t.After(end) {
				end = t
			}
		}
	}
	if start.IsZero() {
		return start, end, false, nil
	}
	return start.Add(-step), end, true, nil
}

// sample reads one [time, "value"] pair.
func sampleTime(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(math.Round(f * 1000))).UTC(), true
}

func sampleValue(v any) (float64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseFloat(s, 64)
	return x, err == nil
}

var nonLabel = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// promLabel is the label an attribute key becomes (dots and every other
// character outside [a-zA-Z0-9_] as underscores), as the exporters
// translate resource and point attributes.
func promLabel(key string) string { return nonLabel.ReplaceAllString(key, "_") }

// resourceLabels maps the labels that carry resource attributes (the
// prometheus exporter's resource_to_telemetry_conversion) back to their
// keys; job and instance are the exporter's service.name and
// service.instance.id, which a Prometheus scrape renames exported_job and
// exported_instance.
var resourceLabels = func() map[string]string {
	m := map[string]string{"exported_job": contract.AttrServiceName, "exported_instance": contract.AttrServiceInstanceID}
	for _, k := range []string{contract.AttrRunID, contract.AttrServerName, contract.AttrServerType, contract.AttrServiceGroup,
		contract.AttrVersion, contract.AttrDLRank, contract.AttrDLWorldSize, contract.AttrServiceName,
		contract.AttrServiceInstanceID, contract.AttrProcessPID, contract.AttrDeploymentEnvironment, "host.name"} {
		m[promLabel(k)] = k
	}
	return m
}()

// seriesKey is one point stream of one instrument in one process.
type seriesKey struct {
	proc  *proc
	attrs string // the point attributes, encoded
}

// histSample gathers a histogram point from its _bucket, _sum and _count
// series at one time.
type histSample struct {
	buckets map[float64]float64 // le -> cumulative count
	sum     float64
	count   float64
}

// addInstrument reads every series of in for the run over [start, end]
// and adds them to their processes as metric records.
func (f *fetcher) addInstrument(ctx context.Context, in contract.Instrument, start, end time.Time, step time.Duration) error {
	name := in.PrometheusName()
	query := name + "{" + f.runSelector() + "}"
	if in.Kind == contract.Histogram {
		query = fmt.Sprintf(`{__name__=~"%s_bucket|%s_sum|%s_count",%s}`, name, name, name, f.runSelector())
	}
	a, err := f.promRange(ctx, query, start, end, step)
	if err != nil {
		return err
	}
	if len(a.Data.Result) == 0 {
		return nil
	}
	attrLabel := map[string]string{}
	for _, k := range in.Attrs {
		attrLabel[promLabel(k)] = k
	}
	// process -> time -> attribute set -> value (or histogram parts)
	type pointAt struct {
		attrs map[string]any
		value float64
		hist  *histSample
	}
	byProc := map[*proc]map[int64]map[string]*pointAt{}
	firstSeen := map[seriesKey]int64{}
	for _, r := range a.Data.Result {
		res := map[string]any{}
		attrs := map[string]any{}
		for l, v := range r.Metric {
			if k, ok := resourceLabels[l]; ok {
				res[k] = v
			}
			if k, ok := attrLabel[l]; ok {
				attrs[k] = v
			}
		}
		if pid, err := strconv.ParseInt(r.Metric[promLabel(contract.AttrProcessPID)], 10, 64); err == nil {
			res[contract.AttrProcessPID] = pid
		}
		p := f.process(res)
		// A histogram is three kinds of series; its _count stands for it.
		if len(r.Values) > 0 && (in.Kind != contract.Histogram || strings.HasSuffix(r.Metric["__name__"], "_count")) {
			f.stats.Series++
		}
		ak := report.AttrKey(attrs)
		metricName := r.Metric["__name__"]
		le := r.Metric["le"]
		if byProc[p] == nil {
			byProc[p] = map[int64]map[string]*pointAt{}
		}
		for _, v := range r.Values {
			t, ok1 := sampleTime(v[0])
			x, ok2 := sampleValue(v[1])
			if !ok1 || !ok2 {
				continue
			}
			ns := t.UnixNano()
			at := byProc[p][ns]
			if at == nil {
				at = map[string]*pointAt{}
				byProc[p][ns] = at
			}
			pt := at[ak]
			if pt == nil {
				pt = &pointAt{attrs: attrs}
				at[ak] = pt
			}
			sk := seriesKey{p, ak}
			if first, ok := firstSeen[sk]; !ok || ns < first {
				firstSeen[sk] = ns
			}
			if in.Kind != contract.Histogram {
				pt.value = x
				continue
			}
			if pt.hist == nil {
				pt.hist = &histSample{buckets: map[float64]float64{}}
			}
			switch {
			case strings.HasSuffix(metricName, "_bucket"):
				if b, err := strconv.ParseFloat(le, 64); err == nil {
					pt.hist.buckets[b] = x
				}
			case strings.HasSuffix(metricName, "_sum"):
				pt.hist.sum = x
			case strings.HasSuffix(metricName, "_count"):
				pt.hist.count = x
			}
		}
	}
	kind, temporality := telfile.MetricGauge, ""
	switch in.Kind {
	case contract.Counter, contract.UpDownCounter:
		kind, temporality = telfile.MetricSum, telfile.TemporalityCumulative
	case contract.Histogram:
		kind, temporality = telfile.MetricHistogram, telfile.TemporalityCumulative
	}
	for p, times := range byProc {
		// A sample equal to the one before it says nothing new (the
		// exporter keeps serving a finished run's last values until they
		// expire): only changes are kept, so the run's extent is its own.
		prev := map[string]telfile.Point{}
		stamps := make([]int64, 0, len(times))
		for ns := range times {
			stamps = append(stamps, ns)
		}
		sort.Slice(stamps, func(i, j int) bool { return stamps[i] < stamps[j] })
		for _, ns := range stamps {
			m := &telfile.Metric{
				TimeNS: ns, Scope: contract.MeterScope, Name: in.Name, Description: in.Description, Unit: in.Unit,
				Kind: kind, Temporality: temporality, Monotonic: in.Kind == contract.Counter || in.Kind == contract.Histogram,
			}
			keys := make([]string, 0, len(times[ns]))
			for k := range times[ns] {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				pt := times[ns][k]
				out := telfile.Point{Attributes: pt.attrs, TimeNS: ns}
				if temporality != "" {
					out.StartNS = firstSeen[seriesKey{p, k}]
				}
				if pt.hist == nil {
					out.Value = numberOf(pt.value, in.Float)
				} else if !histogramPoint(pt.hist, &out) {
					continue
				}
				if last, seen := prev[k]; seen && last.Value == out.Value && last.Count == out.Count && last.Sum == out.Sum {
					continue
				}
				prev[k] = out
				m.Points = append(m.Points, out)
			}
			if len(m.Points) > 0 {
				p.metrics = append(p.metrics, m)
			}
		}
	}
	return nil
}

// numberOf writes a sample as the instrument's number type.
func numberOf(v float64, float bool) telfile.Number {
	if !float && v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return telfile.IntNumber(int64(v))
	}
	return telfile.FloatNumber(v)
}

// histogramPoint fills out from a histogram's cumulative buckets; false
// when the parts do not make a histogram (no count, or no buckets).
func histogramPoint(h *histSample, out *telfile.Point) bool {
	if len(h.buckets) == 0 {
		return false
	}
	var bounds []float64
	for b := range h.buckets {
		if !math.IsInf(b, 1) {
			bounds = append(bounds, b)
		}
	}
	sort.Float64s(bounds)
	counts := make([]uint64, len(bounds)+1)
	prev := 0.0
	for i, b := range bounds {
		c := h.buckets[b]
		counts[i] = uint64(math.Max(0, math.Round(c-prev)))
		prev = c
	}
	total := h.count
	if inf, ok := h.buckets[math.Inf(1)]; ok && inf > total {
		total = inf
	}
	counts[len(bounds)] = uint64(math.Max(0, math.Round(total-prev)))
	out.Count = uint64(math.Round(total))
	out.Sum = telfile.FloatNumber(h.sum)
	out.Bounds, out.Counts = bounds, counts
	return true
}
