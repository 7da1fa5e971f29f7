package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// HTMLOptions tunes WriteHTML.
type HTMLOptions struct {
	// SlowestK is the number of slowest rollouts shown as waterfalls; 0
	// leaves the section out.
	SlowestK int
}

// WriteHTML writes the run's report as one self-contained HTML page: the
// same sections as WriteText, with the distributions, the verify success
// over time and the active servers drawn as inline SVG charts and each
// slow rollout's trace as a waterfall that opens on click (plain
// <details> elements; the page works with scripts off).
//
// The page loads nothing: no scripts, styles, fonts or images from
// anywhere, and its Content-Security-Policy forbids it to. Every string
// taken from the run (span names, attributes, service names, error
// messages) is escaped by html/template. Like WriteText, the output
// depends on the run and the options only. It returns the error of
// writing to w, if any.
func WriteHTML(w io.Writer, run Run, opts HTMLOptions) error {
	page := buildPage(&run, opts)
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, page); err != nil {
		return fmt.Errorf("report: rendering HTML: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// The page is built in two steps: buildPage turns the run into the view
// types below (every number already formatted, every chart reduced to
// coordinates by html_svg.go), and the template (assets/page.html.tmpl,
// embedded with the style sheet and the script by html_assets.go) lays
// them out. Strings from the run stay plain strings all the way, so the
// template escapes them; only CSS made here from numbers is passed as
// template.CSS.

type htmlPage struct {
	ID        string
	Dir       string
	Cards     []htmlCard
	Facts     []htmlFact
	Failures  []htmlFailure
	MoreFails int
	Processes []htmlProcess
	Dists     []htmlDist
	Verify    htmlVerify
	Routes    htmlRoutes
	Active    htmlActive
	Slowest   *htmlSlowest
	Notes     []string
	Problems  []htmlProblem
	Nav       []htmlNav
}

type htmlNav struct{ ID, Label string }

type htmlCard struct {
	Label, Value, Detail string
	Bad                  bool
}

type htmlFact struct{ Label, Value string }

type htmlFailure struct {
	Count int
	Noun  string
	Tasks []string
	More  int
	Error string
}

type htmlProcess struct {
	File, Name, Service, Type string
	Spans, Metrics, Logs      int
	Headers                   int
	Empty                     bool
	Swatch                    string
}

type htmlDist struct {
	ID, Title, Metric, SpanName string
	// Source says where the percentiles come from; Resolution, for an
	// estimate, the bucket each lies in.
	Source, Resolution string
	// HistogramNote describes the histogram when the spans gave the
	// percentiles; NoSpans is set when no span was exported.
	HistogramNote string
	NoSpans       bool
	// Err is set when the histograms cannot be merged; Missing when the
	// metric was not exported.
	Err     string
	Missing bool
	Rows    []htmlQuantRow
	Hist    *svgChart
	Strip   *svgChart
}

type htmlQuantRow struct {
	Source, N, P50, P90, P99, Max string
}

type htmlVerify struct {
	Tallies []htmlTally
	Fleet   *htmlTally
	Width   string
	Chart   *svgChart
	Windows []htmlWindow
}

type htmlTally struct {
	Name, Success, Failure, Calls, Fraction, Gauge string
	Failed                                         bool
	Meter                                          template.CSS
}

type htmlWindow struct {
	From, Calls, Failed, Fraction string
	Bad                           bool
}

type htmlRoutes struct {
	Err  string
	Rows []htmlRoute
}

type htmlRoute struct {
	Server, Route, Method, Status, Count, P50, P95, P99 string
	Bad                                                 bool
}

type htmlActive struct {
	Chart *svgChart
	Runs  []activeRun
}

type htmlSlowest struct {
	Asked  int
	Legend []htmlLegend
	Traces []htmlTrace
}

type htmlTrace struct {
	Rank                        int
	Open                        bool
	Duration, RolloutID, TaskID string
	Failed                      bool
	Reward                      string
	Rewarded                    bool
	Error                       string
	TraceID                     string
	Spans                       int
	Total                       string
	Ticks                       []htmlTick
	Rows                        []htmlSpanRow
}

type htmlTick struct {
	Style template.CSS
	Label string
	End   bool
}

type htmlSpanRow struct {
	Offset, Duration, Service, Name, Kind string
	Swatch                                string
	Error, Orphan, Linked                 bool
	Indent, Bar                           template.CSS
	Details                               []htmlKV
	Attrs                                 []htmlKV
}

type htmlKV struct {
	Key, Value string
	Bad        bool
}

type htmlProblem struct {
	Kind, Where, Message string
}

type htmlLegend struct{ Class, Label string }

// paletteSize is the number of service colours the style sheet defines
// (classes s0 to s7); processes beyond it reuse them.
const paletteSize = 8

func buildPage(r *Run, opts HTMLOptions) *htmlPage {
	p := &htmlPage{ID: r.ID, Dir: r.Dir}
	swatch := map[*Process]string{}
	for i, proc := range r.Processes {
		swatch[proc] = "s" + strconv.Itoa(i%paletteSize)
	}
	p.header(r)
	p.processes(r, swatch)
	p.Dists = []htmlDist{
		buildDist(r, "rollout-duration", "Rollout duration", contract.RolloutDuration, contract.SpanRollout, true),
		buildDist(r, "verify-duration", "Verify duration", contract.VerifyDuration, contract.SpanVerify, false),
	}
	p.verify(r)
	p.routes(r)
	p.active(r, swatch)
	if opts.SlowestK > 0 {
		p.slowest(r, opts.SlowestK, swatch)
	}
	p.Notes = make([]string, 0, len(r.Notes))
	for _, n := range r.Notes {
		p.Notes = append(p.Notes, n.String())
	}
	p.problems(r)

	p.Nav = []htmlNav{{"processes", "Processes"}, {"rollout-duration", "Rollout duration"},
		{"verify-duration", "Verify duration"}, {"verify-success", "Verify success"},
		{"http", "HTTP requests"}, {"servers-active", "Active servers"}}
	if p.Slowest != nil {
		p.Nav = append(p.Nav, htmlNav{"slowest", "Slowest rollouts"})
	}
	if len(p.Notes) > 0 {
		p.Nav = append(p.Nav, htmlNav{"notes", "Notes"})
	}
	p.Nav = append(p.Nav, htmlNav{"problems", "Problems"})
	return p
}

func (p *htmlPage) header(r *Run) {
	failed, rewarded, _ := r.rolloutCounts()
	dur := "-"
	if !r.Start.IsZero() {
		dur = fmtDuration(r.Duration())
	}
	p.Cards = []htmlCard{
		{Label: "Telemetry span", Value: dur},
		{Label: "Rollouts", Value: strconv.Itoa(len(r.Rollouts))},
		{Label: "Failed", Value: strconv.Itoa(failed), Bad: failed > 0},
		{Label: "Rewarded", Value: strconv.Itoa(rewarded)},
	}
	fleet := fleetTally(r.VerifyTallies())
	if f := fleet.Fraction(); !math.IsNaN(f) {
		p.Cards = append(p.Cards, htmlCard{Label: "Verify success", Value: fmtPercent(f),
			Detail: fmtCount(fleet.Success) + " of " + fmtCount(fleet.Success+fleet.Failure), Bad: fleet.Failure > 0})
	}
	p.Cards = append(p.Cards,
		htmlCard{Label: "Traces", Value: strconv.Itoa(r.TraceCount())},
		htmlCard{Label: "Spans", Value: strconv.Itoa(r.SpanCount())},
		htmlCard{Label: "Processes", Value: strconv.Itoa(len(r.Processes))},
	)

	p.Facts = append(p.Facts, htmlFact{"Directory", r.Dir})
	if r.Start.IsZero() {
		p.Facts = append(p.Facts, htmlFact{"Telemetry", "none exported"})
	} else {
		p.Facts = append(p.Facts, htmlFact{"Started", startedText(r)}, htmlFact{"Duration", durationText(r)})
	}
	p.Facts = append(p.Facts, htmlFact{"Rollouts", rolloutsText(r)},
		htmlFact{"Traces", fmt.Sprintf("%d with %d spans", r.TraceCount(), r.SpanCount())})

	const maxGroups, maxTasks = 10, 20
	groups := r.Failures()
	for i, g := range groups {
		if i == maxGroups {
			p.MoreFails = len(groups) - maxGroups
			break
		}
		f := htmlFailure{Count: len(g.Rollouts), Noun: "rollouts", Error: g.Error}
		if f.Count == 1 {
			f.Noun = "rollout"
		}
		for _, ro := range g.Rollouts { // in task order already
			f.Tasks = append(f.Tasks, ro.label())
		}
		if len(f.Tasks) > maxTasks {
			f.More = len(f.Tasks) - maxTasks
			f.Tasks = f.Tasks[:maxTasks]
		}
		p.Failures = append(p.Failures, f)
	}
}

func (p *htmlPage) processes(r *Run, swatch map[*Process]string) {
	for _, proc := range r.Processes {
		p.Processes = append(p.Processes, htmlProcess{
			File: proc.File, Name: proc.Name(), Service: orDash(proc.ServiceName), Type: orDash(proc.ServerType),
			Spans: proc.Spans, Metrics: proc.Metrics, Logs: proc.Logs, Headers: proc.Headers,
			Empty: proc.Empty(), Swatch: swatch[proc],
		})
	}
}

func buildDist(r *Run, id, title, metric, spanName string, agentsOnly bool) htmlDist {
	dist := r.Distribution(metric, spanName, agentsOnly)
	d := htmlDist{ID: id, Title: title, Metric: metric, SpanName: spanName, Source: upperFirst(dist.sourceText())}
	h := dist.Histogram
	switch {
	case dist.HistogramErr != nil:
		d.Err = dist.HistogramErr.Error()
	case h == nil || h.Count == 0:
		d.Missing = true
	}
	switch dist.Source {
	case FromSpans:
		d.Rows = append(d.Rows, dist.quantRow(spanName+" spans (exact)", strconv.Itoa(len(dist.Spans))))
	case FromBuckets:
		d.Rows = append(d.Rows, dist.quantRow(metric+" buckets, last export (estimate)", fmtCount(float64(h.Count))))
		d.Resolution = upperFirst(dist.resolutionText())
	}
	d.NoSpans = len(dist.Spans) == 0
	if dist.Source == FromSpans && h != nil && h.Count > 0 {
		d.HistogramNote = fmt.Sprintf("The %s histogram holds %s values at the last export; its buckets are drawn below, the percentiles are the spans'.",
			metric, fmtCount(float64(h.Count)))
	}
	if dist.HistogramErr == nil && h != nil && h.Count > 0 && len(h.Counts) > 0 {
		d.Hist = histogramChart("chart-"+id+"-buckets", title+": values per histogram bucket", h, "ms")
	}
	if ds := dist.Spans; len(ds) > 0 {
		d.Strip = stripChart("chart-"+id+"-spans", title+": every "+spanName+" span", ds)
	}
	return d
}

// upperFirst returns s with its first letter in upper case (s is ASCII
// text made here).
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// quantRow is the distribution's percentiles as one table row.
func (d Distribution) quantRow(source, n string) htmlQuantRow {
	mark := ""
	if d.Source == FromBuckets {
		mark = "~"
	}
	return htmlQuantRow{Source: source, N: n, P50: mark + fmtMS(d.Quantiles[0]), P90: mark + fmtMS(d.Quantiles[1]),
		P99: mark + fmtMS(d.Quantiles[2]), Max: fmtMS(d.Max)}
}

// verifyWindowWidth is the window width of the "over time" view: the
// export interval, widened so that the run fits in maxWindows windows.
func verifyWindowWidth(r *Run) time.Duration {
	width := r.ExportInterval()
	if n := int(r.Duration()/width) + 1; n > maxWindows {
		width *= time.Duration((n + maxWindows - 1) / maxWindows)
	}
	return width
}

func (p *htmlPage) verify(r *Run) {
	tallies := r.VerifyTallies()
	if len(tallies) == 0 {
		return
	}
	for _, v := range tallies {
		gauge := "-"
		if !math.IsNaN(v.Rate) {
			gauge = fmtPercent(v.Rate)
		}
		p.Verify.Tallies = append(p.Verify.Tallies, tallyView(v.Process.Name(), v, gauge))
	}
	f := tallyView("fleet", fleetTally(tallies), "")
	p.Verify.Fleet = &f

	width := verifyWindowWidth(r)
	windows := r.VerifyWindows(width)
	if len(windows) == 0 {
		return
	}
	p.Verify.Width = width.String()
	for _, w := range windows {
		p.Verify.Windows = append(p.Verify.Windows, htmlWindow{
			From: fmtOffset(w.From), Calls: fmtCount(w.Calls()), Failed: fmtCount(w.Failure),
			Fraction: fmtPercent(w.Fraction()), Bad: w.Failure > 0,
		})
	}
	p.Verify.Chart = windowsChart("chart-verify-windows", windows)
}

func tallyView(name string, v VerifyTally, gauge string) htmlTally {
	t := htmlTally{Name: name, Success: fmtCount(v.Success), Failure: fmtCount(v.Failure), Calls: fmtCount(v.Success + v.Failure),
		Fraction: fmtPercent(v.Fraction()), Gauge: gauge, Failed: v.Failure > 0}
	if f := v.Fraction(); !math.IsNaN(f) {
		t.Meter = template.CSS(fmt.Sprintf("width:%.1f%%", f*100))
	}
	return t
}

func (p *htmlPage) routes(r *Run) {
	routes, err := r.HTTPRoutes()
	if err != nil {
		p.Routes.Err = err.Error()
		return
	}
	for _, rs := range routes {
		h := rs.Histogram
		code, _ := strconv.Atoi(rs.Status)
		p.Routes.Rows = append(p.Routes.Rows, htmlRoute{
			Server: rs.Process.Name(), Route: orDash(rs.Route), Method: orDash(rs.Method), Status: orDash(rs.Status),
			Count: strconv.FormatUint(h.Count, 10), P50: fmtMS(h.Quantile(0.5) * 1000),
			P95: fmtMS(h.Quantile(0.95) * 1000), P99: fmtMS(h.Quantile(0.99) * 1000), Bad: code >= 500,
		})
	}
}

func (p *htmlPage) active(r *Run, swatch map[*Process]string) {
	readings := r.ServersActive()
	if len(readings) == 0 {
		return
	}
	p.Active.Runs = activeRuns(r, readings)
	p.Active.Chart = activeChart("chart-servers-active", r, readings, swatch)
}

func (p *htmlPage) slowest(r *Run, k int, swatch map[*Process]string) {
	s := &htmlSlowest{Asked: k}
	p.Slowest = s
	slow := r.SlowestRollouts(k)
	seen := map[*Process]bool{}
	for i, rt := range slow {
		span := rt.Span
		tr := rt.Trace
		t := htmlTrace{
			Rank: i + 1, Open: i == 0, Duration: fmtDuration(span.Duration()),
			Failed: span.Status == "error",
		}
		t.RolloutID, t.TaskID = rt.ids()
		if ro := rt.Rollout; ro != nil {
			t.Failed = t.Failed || ro.Failed()
			t.Error = ro.Error
			t.Reward = fmtNum(ro.Reward)
			t.Rewarded = ro.Rewarded
		}
		if tr == nil {
			// Cannot happen: Load keeps the trace of every span it ranks
			// among the slowest. Drawn alone rather than failing.
			tr = &Trace{ID: span.TraceID, Spans: []*Span{span}, Start: span.Start, End: span.End,
				byID: map[string]*Span{span.SpanID: span}}
		}
		t.TraceID, t.Spans, t.Total = tr.ID, len(tr.Spans), fmtDuration(tr.Duration())
		for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
			t.Ticks = append(t.Ticks, htmlTick{
				Style: template.CSS(fmt.Sprintf("left:%.2f%%", f*100)),
				Label: tickLabel(f, tr.Duration()),
				End:   f == 1,
			})
		}
		total := float64(tr.Duration())
		for _, row := range tr.Waterfall() {
			sp := row.Span
			seen[sp.Process] = true
			left, width := 0.0, 100.0
			if total > 0 {
				left = float64(row.Offset) / total * 100
				width = float64(sp.Duration()) / total * 100
			}
			left = math.Max(0, math.Min(left, 100))
			width = math.Max(0, math.Min(width, 100-left))
			t.Rows = append(t.Rows, htmlSpanRow{
				Offset: "+" + fmtDuration(row.Offset), Duration: fmtDuration(sp.Duration()),
				Service: sp.Process.Name(), Swatch: swatch[sp.Process], Name: sp.Name, Kind: sp.Kind,
				Error: sp.Status == "error", Orphan: row.Orphan, Linked: len(sp.Links) > 0,
				Indent:  template.CSS(fmt.Sprintf("padding-left:%.1fem", 0.9*float64(row.Depth))),
				Bar:     template.CSS(fmt.Sprintf("left:%.2f%%;width:%.2f%%", left, width)),
				Details: spanDetails(r, sp, row),
				Attrs:   spanAttrs(sp),
			})
		}
		s.Traces = append(s.Traces, t)
	}
	for _, proc := range r.Processes {
		if seen[proc] {
			s.Legend = append(s.Legend, htmlLegend{Class: swatch[proc], Label: proc.Name()})
		}
	}
}

// tickLabel labels the waterfall scale at fraction f of the trace.
func tickLabel(f float64, total time.Duration) string {
	if f == 0 {
		return "0"
	}
	return fmtDuration(time.Duration(f * float64(total)))
}

func spanDetails(r *Run, s *Span, row WaterfallRow) []htmlKV {
	parent := s.ParentSpanID
	switch {
	case parent == "":
		parent = "none (a root span)"
	case row.Orphan:
		parent += " (not exported by any process)"
	}
	status := orDash(s.Status)
	if s.StatusMessage != "" {
		status += ": " + s.StatusMessage
	}
	kvs := []htmlKV{
		{Key: "span id", Value: s.SpanID},
		{Key: "parent", Value: parent, Bad: row.Orphan},
		{Key: "kind", Value: orDash(s.Kind)},
		{Key: "status", Value: status, Bad: s.Status == "error"},
		{Key: "process", Value: fmt.Sprintf("%s (%s line %d)", s.Process.Name(), telemetryPath(s.Process), s.Line)},
		{Key: "start", Value: fmt.Sprintf("+%s into the trace, %s", fmtDuration(row.Offset), s.Start.Format(time.RFC3339Nano))},
		{Key: "duration", Value: fmtDuration(s.Duration())},
	}
	for _, l := range s.Links {
		kvs = append(kvs, htmlKV{Key: "links to", Value: r.describeLink(l)})
	}
	return kvs
}

func spanAttrs(s *Span) []htmlKV {
	keys := make([]string, 0, len(s.Attributes))
	for k := range s.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]htmlKV, 0, len(keys))
	for _, k := range keys {
		out = append(out, htmlKV{Key: k, Value: attrText(s.Attributes[k])})
	}
	return out
}

func (p *htmlPage) problems(r *Run) {
	eachShownProblem(r.Problems(), r.Unlisted, func(pr Problem) {
		where := pr.File
		if pr.File != "" && pr.Line > 0 {
			where = fmt.Sprintf("%s:%d", pr.File, pr.Line)
		}
		p.Problems = append(p.Problems, htmlProblem{Kind: string(pr.Kind), Where: where, Message: pr.Message})
	}, func(kind ProblemKind, more int) {
		p.Problems = append(p.Problems, htmlProblem{Kind: string(kind), Message: fmt.Sprintf("... and %d more", more)})
	})
}
