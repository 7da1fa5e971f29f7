package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// DefaultExportInterval is OTEL_METRIC_EXPORT_INTERVAL's default, used
// when neither config.yaml nor the records tell the interval.
const DefaultExportInterval = 10 * time.Second

// LastHistogram merges the last point of every stream of the named
// histogram metric (all processes, all attribute sets). It returns nil
// when the metric was not exported.
func (r *Run) LastHistogram(name string) (*Histogram, error) {
	var hs []*Histogram
	for _, s := range r.SeriesNamed(name) {
		hs = append(hs, s.Last().Histogram)
	}
	h, err := MergeHistograms(hs...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

// CounterTotals sums the last value of every stream of the named metric,
// grouped by the value of the attribute key.
func (r *Run) CounterTotals(name, key string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range r.SeriesNamed(name) {
		out[s.Attr(key)] += s.Last().Value
	}
	return out
}

// SpanDurations returns the durations of every span with the given name,
// sorted in increasing order. With agentsOnly set, only spans exported by
// agent processes count (or every process, when no process says it is an
// agent). Every span read counts, whether or not its trace was kept in
// full.
func (r *Run) SpanDurations(name string, agentsOnly bool) []time.Duration {
	agents := agentsOnly && haveAgent(r.Processes)
	var out []time.Duration
	for _, p := range r.Processes {
		if !agents || p.ServerType == contract.ServerTypeAgent {
			out = append(out, r.index.durations[durationKey{p, name}]...)
		}
	}
	slices.Sort(out)
	return out
}

// DurationQuantile returns the nearest-rank q-quantile (q in [0, 1]) of
// sorted durations, or -1 when there are none.
func DurationQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return -1
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// VerifyTally is one process's verification count, from the last export of
// its gym.verify.calls counter and gym.verify.success_rate gauge.
type VerifyTally struct {
	// Process is the resources server.
	Process *Process
	// Success and Failure are the counter's final values.
	Success, Failure float64
	// Rate is the last gym.verify.success_rate reading; NaN when the gauge
	// was not exported.
	Rate float64
}

// Fraction returns Success over all calls; NaN when there were none.
func (t VerifyTally) Fraction() float64 {
	if t.Success+t.Failure == 0 {
		return math.NaN()
	}
	return t.Success / (t.Success + t.Failure)
}

// fleetTally adds up the calls of every tally; its Rate is unset.
func fleetTally(tallies []VerifyTally) VerifyTally {
	var fleet VerifyTally
	for _, v := range tallies {
		fleet.Success += v.Success
		fleet.Failure += v.Failure
	}
	return fleet
}

// VerifyTallies returns one tally per process that exported
// gym.verify.calls or gym.verify.success_rate, in process order.
func (r *Run) VerifyTallies() []VerifyTally {
	var out []VerifyTally
	for _, p := range r.Processes {
		t := VerifyTally{Process: p, Rate: math.NaN()}
		seen := false
		var rateAt time.Time
		for _, s := range r.Series {
			if s.Process != p || len(s.Points) == 0 {
				continue
			}
			last := s.Last()
			switch s.Name {
			case contract.VerifyCalls:
				seen = true
				switch s.Attr(contract.AttrVerifyOutcome) {
				case contract.OutcomeSuccess:
					t.Success += last.Value
				case contract.OutcomeFailure:
					t.Failure += last.Value
				}
			case contract.VerifySuccessRate:
				seen = true
				if !last.Time.Before(rateAt) {
					t.Rate, rateAt = last.Value, last.Time
				}
			}
		}
		if seen {
			out = append(out, t)
		}
	}
	return out
}

// Window is a slice of the run's time with the verifications that
// completed in it, fleet-wide.
type Window struct {
	// From and To are offsets from Run.Start; the window is [From, To).
	From, To time.Duration
	// Success and Failure are how much the gym.verify.calls counters of
	// every process went up in the window.
	Success, Failure float64
}

// Calls returns Success plus Failure.
func (w Window) Calls() float64 { return w.Success + w.Failure }

// Fraction returns Success over Calls; NaN for a window without calls.
func (w Window) Fraction() float64 {
	if w.Calls() == 0 {
		return math.NaN()
	}
	return w.Success / w.Calls()
}

// VerifyWindows cuts the run into windows of the given width, starting at
// Run.Start, and assigns each increase of a gym.verify.calls stream (the
// difference between two consecutive exports, or the first export's whole
// value) to the window holding the export that showed it. A counter that
// went down was reset, and its new value counts as the increase. Every
// window up to the last export is returned, empty ones included.
func (r *Run) VerifyWindows(width time.Duration) []Window {
	if width <= 0 {
		return nil
	}
	type inc struct {
		at      time.Duration
		success bool
		delta   float64
	}
	var incs []inc
	last := time.Duration(-1)
	for _, s := range r.SeriesNamed(contract.VerifyCalls) {
		outcome := s.Attr(contract.AttrVerifyOutcome)
		if outcome != contract.OutcomeSuccess && outcome != contract.OutcomeFailure {
			continue
		}
		prev := 0.0
		for _, p := range s.Points {
			d := p.Value - prev
			if d < 0 {
				d = p.Value
			}
			prev = p.Value
			at := r.Offset(p.Time)
			incs = append(incs, inc{at, outcome == contract.OutcomeSuccess, d})
			last = max(last, at)
		}
	}
	if last < 0 {
		return nil
	}
	n := int(last/width) + 1
	out := make([]Window, n)
	for i := range out {
		out[i].From = time.Duration(i) * width
		out[i].To = time.Duration(i+1) * width
	}
	for _, c := range incs {
		i := max(0, min(int(c.at/width), n-1))
		if c.success {
			out[i].Success += c.delta
		} else {
			out[i].Failure += c.delta
		}
	}
	return out
}

// ExportInterval returns the metric export interval: config.yaml's
// metric_export_interval_ms, else the median gap between consecutive
// exports of one stream, else DefaultExportInterval.
func (r *Run) ExportInterval() time.Duration {
	if r.Config != nil && r.Config.MetricExportInterval > 0 {
		return r.Config.MetricExportInterval
	}
	var gaps []time.Duration
	for _, s := range r.Series {
		for i := 1; i < len(s.Points); i++ {
			if g := s.Points[i].Time.Sub(s.Points[i-1].Time); g > 0 {
				gaps = append(gaps, g)
			}
		}
	}
	if len(gaps) == 0 {
		return DefaultExportInterval
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}

// RouteStats is the request latency of one route of one server with one
// response status.
type RouteStats struct {
	// Process is the server that handled the requests.
	Process *Process
	// Route is the route pattern, Method the request method and Status
	// the response status code, as text.
	Route, Method, Status string
	// Histogram holds the latencies in seconds, from the last export.
	Histogram *Histogram
}

// HTTPRoutes returns http.server.request.duration broken down by server,
// route, method and status (streams differing only in other attributes
// are merged), sorted in that order.
func (r *Run) HTTPRoutes() ([]RouteStats, error) {
	byKey := map[string]*RouteStats{}
	var out []*RouteStats
	for _, s := range r.SeriesNamed(contract.HTTPServerRequestDuration) {
		h := s.Last().Histogram
		if h == nil {
			continue
		}
		rs := RouteStats{Process: s.Process, Route: s.Attr(contract.AttrHTTPRoute), Method: s.Attr(contract.AttrHTTPRequestMethod), Status: s.Attr(contract.AttrHTTPResponseStatus)}
		key := strings.Join([]string{s.Process.File, rs.Route, rs.Method, rs.Status}, "\x00")
		if have := byKey[key]; have != nil {
			merged, err := MergeHistograms(have.Histogram, h)
			if err != nil {
				return nil, fmt.Errorf("%s %s %s %s: %w", contract.HTTPServerRequestDuration, s.Process.Name(), rs.Route, rs.Status, err)
			}
			have.Histogram = merged
			continue
		}
		rs.Histogram = h
		byKey[key] = &rs
		out = append(out, &rs)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Process.Name() != b.Process.Name() {
			return a.Process.Name() < b.Process.Name()
		}
		if a.Route != b.Route {
			return a.Route < b.Route
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		if len(a.Status) != len(b.Status) {
			return len(a.Status) < len(b.Status)
		}
		return a.Status < b.Status
	})
	res := make([]RouteStats, len(out))
	for i, p := range out {
		res[i] = *p
	}
	return res, nil
}

// GaugeReading is one exported reading of a gauge.
type GaugeReading struct {
	// Process is the process that exported it.
	Process *Process
	// Time is the collection time.
	Time time.Time
	// Value is the reading.
	Value float64
}

// ServersActive returns every exported gym.servers.active reading, by
// time and then process file.
func (r *Run) ServersActive() []GaugeReading {
	var out []GaugeReading
	for _, s := range r.SeriesNamed(contract.ServersActive) {
		for _, p := range s.Points {
			out = append(out, GaugeReading{Process: s.Process, Time: p.Time, Value: p.Value})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Process.File < out[j].Process.File
	})
	return out
}

// RolloutTrace is one rollout's span with the trace it belongs to.
type RolloutTrace struct {
	// Span is the agent's gym.rollout span.
	Span *Span
	// Trace is the whole trace, spans of every process included.
	Trace *Trace
	// Rollout is the matching rollouts.jsonl line (by rollout id, else by
	// trace id); nil when there is none.
	Rollout *Rollout
}

// SlowestRollouts returns the k longest gym.rollout spans exported by
// agents (ties broken by trace id), longest first. A Run from LoadWith
// holds the traces of the LoadOptions.KeepSlowest slowest rollouts only,
// so it returns at most that many.
func (r *Run) SlowestRollouts(k int) []RolloutTrace {
	spans := r.index.slowest[:max(0, min(k, len(r.index.slowest)))]
	out := make([]RolloutTrace, 0, len(spans))
	for _, s := range spans {
		out = append(out, RolloutTrace{Span: s, Trace: r.Trace(s.TraceID), Rollout: r.rolloutFor(s)})
	}
	return out
}

// ids returns the rollout id and task id to show for the rollout: the
// span's attributes, else the recorded rollout's, else "-".
func (rt RolloutTrace) ids() (rolloutID, taskID string) {
	rolloutID, taskID = rt.Span.Attr(contract.AttrRolloutID), rt.Span.Attr(contract.AttrTaskID)
	if ro := rt.Rollout; ro != nil {
		rolloutID, taskID = cmp.Or(rolloutID, ro.RolloutID), cmp.Or(taskID, ro.TaskID)
	}
	return orDash(rolloutID), orDash(taskID)
}

func (r *Run) rolloutFor(s *Span) *Rollout {
	id := s.Attr(contract.AttrRolloutID)
	for i := range r.Rollouts {
		if id != "" && r.Rollouts[i].RolloutID == id {
			return &r.Rollouts[i]
		}
	}
	for i := range r.Rollouts {
		if r.Rollouts[i].TraceID == s.TraceID {
			return &r.Rollouts[i]
		}
	}
	return nil
}

// ProblemKind classifies a Problem.
type ProblemKind string

// The problems Problems looks for, in the order it reports them.
const (
	// ProblemBrokenTrace is a span whose parent never arrived.
	ProblemBrokenTrace ProblemKind = "broken trace"
	// ProblemSilentProcess is a telemetry file with no spans, metrics or
	// logs.
	ProblemSilentProcess ProblemKind = "exported nothing"
	// ProblemMissingTelemetry is a configured server with no telemetry
	// file.
	ProblemMissingTelemetry ProblemKind = "no telemetry file"
	// ProblemServersActiveWriter is a gym.servers.active stream exported
	// by a process that is not the orchestrator.
	ProblemServersActiveWriter ProblemKind = "servers.active writer"
	// ProblemRunIDMismatch is a telemetry file from another run.
	ProblemRunIDMismatch ProblemKind = "other run"
	// ProblemSpanLoss is a process whose telemetry lost spans (see
	// Run.SpanLosses).
	ProblemSpanLoss ProblemKind = "spans lost"
)

var problemOrder = []ProblemKind{ProblemBrokenTrace, ProblemSpanLoss, ProblemSilentProcess, ProblemMissingTelemetry,
	ProblemServersActiveWriter, ProblemRunIDMismatch}

// Problem is something wrong with the run's telemetry.
type Problem struct {
	// Kind says what is wrong.
	Kind ProblemKind
	// File is the telemetry file involved, relative to the run directory;
	// "" when there is none. Line is the 1-based line, 0 if not relevant.
	File string
	Line int
	// TraceID and SpanID locate the span of a broken trace.
	TraceID, SpanID string
	// Message describes the problem in one sentence.
	Message string
}

// Problems checks the run for broken traces, processes whose telemetry
// lost spans, processes that exported nothing, configured servers without a telemetry file (when config.yaml
// says telemetry was on and exported to files), gym.servers.active
// written by a process other than the orchestrator, and telemetry files
// from another run. The result is sorted by kind, file and position.
//
// Only the first few broken traces are listed (as many as a report
// shows); Unlisted counts the others.
func (r *Run) Problems() []Problem {
	out := slices.Clone(r.index.broken)
	for _, p := range r.Processes {
		if p.Empty() {
			what := "only a resource header"
			if p.Headers == 0 {
				what = "an empty file"
			}
			out = append(out, Problem{Kind: ProblemSilentProcess, File: telemetryPath(p),
				Message: fmt.Sprintf("%s (%s) exported nothing: %s, no spans or metrics", p.Name(), orDash(p.ServerType), what)})
		}
	}
	if c := r.Config; c != nil && c.TelemetryEnabled && (len(c.Exporters) == 0 || slices.Contains(c.Exporters, "file")) {
		for _, s := range c.Servers {
			if r.Process(s.Name) != nil {
				continue
			}
			msg := fmt.Sprintf("server %s (%s) is in %s but wrote no telemetry file", s.Name, orDash(s.Type), contract.RunConfigFile)
			if c.ExportStrategy != "" && c.ExportStrategy != "all_ranks" {
				msg += fmt.Sprintf(" (export strategy %s may leave it out)", c.ExportStrategy)
			}
			out = append(out, Problem{Kind: ProblemMissingTelemetry, Message: msg})
		}
	}
	for _, s := range r.SeriesNamed(contract.ServersActive) {
		if s.Process.ServerType != contract.ServerTypeOrchestrator {
			out = append(out, Problem{Kind: ProblemServersActiveWriter, File: telemetryPath(s.Process),
				Message: fmt.Sprintf("%s (%s) exported %s; only the orchestrator may write it",
					s.Process.Name(), orDash(s.Process.ServerType), contract.ServersActive)})
		}
	}
	for _, l := range r.SpanLosses() {
		if l.Lost() > 0 {
			out = append(out, Problem{Kind: ProblemSpanLoss, File: telemetryPath(l.Process),
				Message: fmt.Sprintf("%s: %s", l.Process.Name(), l)})
		}
	}
	for _, p := range r.Processes {
		if p.RunID != "" && p.RunID != r.ID {
			out = append(out, Problem{Kind: ProblemRunIDMismatch, File: telemetryPath(p),
				Message: fmt.Sprintf("%s reports run id %s, not %s", p.Name(), p.RunID, r.ID)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return slices.Index(problemOrder, a.Kind) < slices.Index(problemOrder, b.Kind)
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return out
}

// Unlisted returns how many problems of kind the Run counted but Problems
// does not list: broken traces beyond the first few, 0 for other kinds.
func (r *Run) Unlisted(kind ProblemKind) int {
	if kind == ProblemBrokenTrace {
		return r.index.brokenUnlisted
	}
	return 0
}

func telemetryPath(p *Process) string { return contract.RunTelemetryDir + "/" + p.File }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FailureGroup is a set of failed rollouts sharing one error message.
type FailureGroup struct {
	// Error is the message the failure lines recorded (Rollout.Error).
	Error string
	// Rollouts are the failed rollouts, by task index and rollout index.
	Rollouts []*Rollout
}

// Failures groups the failed rollouts by error message, most frequent
// first (ties by message).
func (r *Run) Failures() []FailureGroup {
	idx := map[string]int{}
	var out []FailureGroup
	for i := range r.Rollouts {
		ro := &r.Rollouts[i]
		if !ro.Failed() {
			continue
		}
		j, ok := idx[ro.Error]
		if !ok {
			j = len(out)
			idx[ro.Error] = j
			out = append(out, FailureGroup{Error: ro.Error})
		}
		out[j].Rollouts = append(out[j].Rollouts, ro)
	}
	for _, g := range out {
		slices.SortStableFunc(g.Rollouts, compareRollouts)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].Rollouts) != len(out[j].Rollouts) {
			return len(out[i].Rollouts) > len(out[j].Rollouts)
		}
		return out[i].Error < out[j].Error
	})
	return out
}
