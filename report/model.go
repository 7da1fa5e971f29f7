package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// Run is what Load read from one run directory. It holds the data as it
// was exported, indexed for lookups; it has no opinion on presentation.
// The analysis methods (Problems, VerifyWindows, SlowestRollouts, ...)
// derive the views a renderer shows, so a text and an HTML renderer agree
// on every number.
type Run struct {
	// Dir is the run directory exactly as it was given to Load.
	Dir string
	// ID is the run id: config.yaml's run_id, else the nemo.run.id the
	// processes report, else the directory's base name.
	ID string
	// Config is what config.yaml says; nil when the file is absent or
	// unreadable (the latter leaves a Note).
	Config *Config
	// Processes has one entry per telemetry file, sorted by file name.
	Processes []*Process
	// Traces holds the traces kept in full, each with every span of every
	// process, sorted by start time and then trace id. A Run from LoadWith
	// keeps the traces its LoadOptions ask for; TraceCount and SpanCount
	// count every trace and span read all the same.
	Traces []*Trace
	// Series holds every metric stream, sorted by metric name, process
	// file and attribute set.
	Series []*Series
	// Rollouts are the rollouts the collector recorded: the readable
	// lines of rollouts.jsonl, in file order, then those of
	// rollouts_failures.jsonl that still stand (see LoadWith).
	Rollouts []Rollout
	// Notes are recoverable problems met while reading: a truncated last
	// line, an unreadable rollout line, an unreadable config.yaml.
	Notes []Note
	// Start and End bound every timestamp found in the telemetry (span
	// starts and ends, metric collection times). Both are zero when
	// nothing was exported.
	Start, End time.Time

	traceByID map[string]*Trace
	// index describes every span read, most of which Traces does not
	// hold. The span counts, durations, slowest rollouts and broken traces
	// come from it alone, so a Run made by hand reports none.
	index spanIndex
}

// Config is the part of config.yaml (the effective configuration gymlens run
// writes into the run directory) that the report uses.
type Config struct {
	// RunID is the run_id key.
	RunID string
	// Servers are the servers the orchestrator was asked to start; the
	// orchestrator itself is not listed.
	Servers []ConfigServer
	// TelemetryEnabled reports the telemetry block's enabled key; it is
	// true when the key is absent.
	TelemetryEnabled bool
	// Exporters lists the telemetry block's exporter key (comma-separated
	// in the file); empty when absent.
	Exporters []string
	// ExportStrategy is the telemetry block's export_strategy, "" if
	// absent.
	ExportStrategy string
	// MetricExportInterval is the telemetry block's
	// metric_export_interval_ms; 0 when absent.
	MetricExportInterval time.Duration
}

// ConfigServer is one entry of config.yaml's servers list.
type ConfigServer struct {
	// Name is the server name, which also names its telemetry file.
	Name string
	// Type is the server type, such as resources_servers.
	Type string
}

// Process is one telemetry file and the process that wrote it, as its
// resource header describes it.
type Process struct {
	// File is the file's base name, such as "arithmetic.jsonl".
	File string
	// ServiceName is the service.name resource attribute.
	ServiceName string
	// ServerName is nemo.gym.server.name.
	ServerName string
	// ServerType is nemo.gym.server.type (resources_servers,
	// responses_api_agents, responses_api_models or orchestrator).
	ServerType string
	// InstanceID is service.instance.id of the first header.
	InstanceID string
	// RunID is nemo.run.id.
	RunID string
	// Resource holds every attribute of the file's first resource header.
	Resource map[string]any
	// Headers counts the resource headers in the file; more than one means
	// several writers appended to it.
	Headers int
	// Spans, Metrics and Logs count the records of each type. Metrics
	// counts metric lines (one per instrument per export), not points.
	Spans, Metrics, Logs int
}

// Name returns the short name used in tables: the server name, else the
// file name without its extension.
func (p *Process) Name() string {
	if p.ServerName != "" {
		return p.ServerName
	}
	return strings.TrimSuffix(p.File, ".jsonl")
}

// Empty reports whether the file holds no spans, metrics or logs (a
// resource header alone, or nothing at all).
func (p *Process) Empty() bool { return p.Spans+p.Metrics+p.Logs == 0 }

// Span is one exported span.
type Span struct {
	// Process is the process whose file holds the span.
	Process *Process
	// Line is the span's 1-based line number in that file.
	Line int
	// TraceID, SpanID and ParentSpanID are lowercase hex identifiers;
	// ParentSpanID is empty for a root span.
	TraceID, SpanID, ParentSpanID string
	// Name is the span name.
	Name string
	// Kind is internal, server, client, producer or consumer.
	Kind string
	// Start and End are the recorded start and end times.
	Start, End time.Time
	// Status is unset, ok or error; StatusMessage describes an error.
	Status, StatusMessage string
	// Attributes are the span attributes as decoded from JSON (numbers
	// are float64).
	Attributes map[string]any
	// Links point at related spans, usually in another trace: a rollout's
	// root span links to the collection's gym.job span.
	Links []Link
}

// Link is a span's reference to another span (see Run.LinkTarget).
type Link struct {
	// TraceID and SpanID identify the linked span, in lowercase hex.
	TraceID, SpanID string
}

// Duration returns End minus Start.
func (s *Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Attr returns the attribute key formatted as text, "" when absent.
func (s *Span) Attr(key string) string { return attrText(s.Attributes[key]) }

// Trace is every exported span sharing one trace id, whichever process
// exported it.
type Trace struct {
	// ID is the trace id.
	ID string
	// Spans are sorted by start time, then span id.
	Spans []*Span
	// Start is the earliest span start; End the latest span end.
	Start, End time.Time

	byID map[string]*Span
}

// Duration returns End minus Start.
func (t *Trace) Duration() time.Duration { return t.End.Sub(t.Start) }

// Span returns the span with the given id, or nil.
func (t *Trace) Span(id string) *Span { return t.byID[id] }

// Orphans returns the spans that name a parent the trace does not hold:
// the parent was never exported, so the trace is broken there.
func (t *Trace) Orphans() []*Span {
	var out []*Span
	for _, s := range t.Spans {
		if s.ParentSpanID != "" && t.byID[s.ParentSpanID] == nil {
			out = append(out, s)
		}
	}
	return out
}

// WaterfallRow is one line of a trace drawn as a tree.
type WaterfallRow struct {
	// Span is the span drawn on this row.
	Span *Span
	// Depth is the number of ancestors found in the trace.
	Depth int
	// Offset is the span's start relative to the trace's start.
	Offset time.Duration
	// Orphan is set when the span's parent is missing from the trace.
	Orphan bool
}

// Waterfall lays the trace out as a tree: roots (and orphans) at depth 0,
// each followed by its children, siblings in start order.
func (t *Trace) Waterfall() []WaterfallRow {
	children := map[string][]*Span{}
	var roots []*Span
	for _, s := range t.Spans {
		if s.ParentSpanID != "" && t.byID[s.ParentSpanID] != nil && s.ParentSpanID != s.SpanID {
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	rows := make([]WaterfallRow, 0, len(t.Spans))
	seen := map[*Span]bool{}
	var walk func(s *Span, depth int)
	walk = func(s *Span, depth int) {
		if seen[s] {
			return
		}
		seen[s] = true
		rows = append(rows, WaterfallRow{
			Span:   s,
			Depth:  depth,
			Offset: s.Start.Sub(t.Start),
			Orphan: s.ParentSpanID != "" && t.byID[s.ParentSpanID] == nil,
		})
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	// Spans caught in a parent cycle reach no root; show them flat rather
	// than lose them.
	for _, s := range t.Spans {
		if !seen[s] {
			walk(s, 0)
		}
	}
	return rows
}

// Series is one metric stream: one instrument of one process with one
// attribute set, followed across exports.
type Series struct {
	// Process is the process that exported the stream.
	Process *Process
	// Instance is the service.instance.id in effect when the stream was
	// read; it separates writers that appended to the same file.
	Instance string
	// Name, Unit and Kind (sum, gauge, histogram) describe the instrument.
	Name, Unit, Kind string
	// Temporality is the stream's temporality as exported; Points are
	// cumulative either way (see Points).
	Temporality string
	// Attributes identify the stream within the instrument.
	Attributes map[string]any
	// Points are the stream's values in export order. Sums and histograms
	// are cumulative: delta streams are added up while loading, so the
	// last point is always the total.
	Points []Point
}

// Last returns the final point; the zero Point when there is none.
func (s *Series) Last() Point {
	if len(s.Points) == 0 {
		return Point{}
	}
	return s.Points[len(s.Points)-1]
}

// Attr returns the attribute key formatted as text, "" when absent.
func (s *Series) Attr(key string) string { return attrText(s.Attributes[key]) }

// Point is one value of a Series.
type Point struct {
	// Time is when the value was collected.
	Time time.Time
	// Start is the start of the period the value covers; zero if unknown.
	Start time.Time
	// Value is the reading of a sum or a gauge.
	Value float64
	// Histogram is set for histogram streams.
	Histogram *Histogram
}

// Rollout is one rollout the collector recorded: a line of rollouts.jsonl
// (a completed rollout) or of its failures file (a failed one).
type Rollout struct {
	// File is the file of the line, contract.RunRolloutsFile or contract.RunFailuresFile; Line
	// is its 1-based line number.
	File string
	Line int
	// TaskIndex and RolloutIndex are the line's _ng_task_index and
	// _ng_rollout_index, -1 when it has none.
	TaskIndex, RolloutIndex int
	// TaskID is the task index in decimal ("" without one): a dataset row
	// has no id of its own, its place in the dataset identifies it.
	TaskID string
	// RolloutID is the rollout id the collector recorded (see
	// rollout.Bookkeeping), else "<task index>-<rollout index>".
	RolloutID string
	// TraceID is the rollout's trace as the agent reported it; "" when it
	// reported none.
	TraceID string
	// Reward is the verifier's score; Rewarded reports a completed
	// rollout whose reward is above 0.
	Reward   float64
	Rewarded bool
	// FailureClass is the _ng_failure_class of a failed rollout.
	FailureClass string
	// Error says why the rollout failed (the failure line's
	// _ng_failure_message, else the _ng_failure_error of older runs, else
	// its _ng_failure_judge_error, else its class); empty for a completed
	// rollout.
	Error string
	// DurationMS is the collector's wall clock for the rollout's last
	// /run call.
	DurationMS float64
}

// Failed reports whether the rollout failed.
func (r Rollout) Failed() bool { return r.Error != "" }

// label names the rollout in lists: its rollout id, else its task.
func (r Rollout) label() string {
	if r.RolloutID != "" {
		return r.RolloutID
	}
	return orDash(r.TaskID)
}

// compareRollouts orders rollouts by task index, rollout index and label.
func compareRollouts(a, b *Rollout) int {
	if a.TaskIndex != b.TaskIndex {
		return a.TaskIndex - b.TaskIndex
	}
	if a.RolloutIndex != b.RolloutIndex {
		return a.RolloutIndex - b.RolloutIndex
	}
	return strings.Compare(a.label(), b.label())
}

// Note is a recoverable problem met while reading the run directory.
type Note struct {
	// File is the file's path relative to the run directory.
	File string
	// Line is the 1-based line number, 0 when the note is about the whole
	// file.
	Line int
	// Message says what was wrong and what was done about it.
	Message string
}

// String formats the note as "file:line: message".
func (n Note) String() string {
	if n.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", n.File, n.Line, n.Message)
	}
	return n.File + ": " + n.Message
}

// Trace returns the trace with the given id, or nil when it was not kept
// in full (see Run.Traces).
func (r *Run) Trace(id string) *Trace { return r.traceByID[id] }

// LinkTarget returns the span l points at, or nil when no process of the
// run exported it. Only spans of Run.Traces are found; LoadWith keeps the
// traces that their spans link to.
func (r *Run) LinkTarget(l Link) *Span {
	if t := r.traceByID[l.TraceID]; t != nil {
		return t.byID[l.SpanID]
	}
	return nil
}

// describeLink names the span l points at for the reports: its name and
// process and the trace it is in, or the bare ids when it was not exported.
func (r *Run) describeLink(l Link) string {
	if s := r.LinkTarget(l); s != nil {
		return fmt.Sprintf("%s (%s), trace %s", s.Name, s.Process.Name(), l.TraceID)
	}
	return fmt.Sprintf("span %s of trace %s (not exported by any process)", l.SpanID, l.TraceID)
}

// Offset returns t relative to the run's start.
func (r *Run) Offset(t time.Time) time.Duration { return t.Sub(r.Start) }

// Duration returns End minus Start: how long the telemetry spans.
func (r *Run) Duration() time.Duration { return r.End.Sub(r.Start) }

// rolloutCounts returns how many rollouts failed and how many were
// rewarded, and how many lines of the failures file stand.
func (r *Run) rolloutCounts() (failed, rewarded, inFailures int) {
	for _, ro := range r.Rollouts {
		if ro.Failed() {
			failed++
		}
		if ro.Rewarded {
			rewarded++
		}
		if ro.File == contract.RunFailuresFile {
			inFailures++
		}
	}
	return failed, rewarded, inFailures
}

// TraceCount returns the number of distinct trace ids among the spans
// read, whether or not their traces were kept in full.
func (r *Run) TraceCount() int { return r.index.traces }

// SpanCount returns the number of spans read, whether or not their traces
// were kept in full.
func (r *Run) SpanCount() int { return r.index.spans }

// jobDuration returns the duration of the collection's gym.job span (the
// first one, should there be several), whether or not its trace was kept
// in full.
func (r *Run) jobDuration() (time.Duration, bool) { return r.index.job, r.index.hasJob }

// Process returns the process with the given server name (or, failing
// that, file base name without extension), or nil.
func (r *Run) Process(name string) *Process {
	for _, p := range r.Processes {
		if p.ServerName == name {
			return p
		}
	}
	for _, p := range r.Processes {
		if strings.TrimSuffix(p.File, ".jsonl") == name {
			return p
		}
	}
	return nil
}

// SeriesNamed returns the series of the named metric, in Run order.
func (r *Run) SeriesNamed(name string) []*Series {
	var out []*Series
	for _, s := range r.Series {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// attrText formats an attribute value decoded from JSON. Whole numbers
// print without a fraction, so a status code reads 200, not 200.000000.
func attrText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprintf("%g", x)
	default:
		return fmt.Sprint(x)
	}
}

// AttrKey is a canonical text form of an attribute set (its keys in order,
// each with its value as the report prints it), used to tell metric
// streams apart and to order them.
func AttrKey(attrs map[string]any) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(attrText(attrs[k]))
	}
	return b.String()
}
