package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
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
// coordinates), and the template lays them out. Strings from the run stay
// plain strings all the way, so the template escapes them; only CSS made
// here from numbers is passed as template.CSS.

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

// svgChart is a chart reduced to shapes in a W by H coordinate space; the
// SVG scales to the width of its container.
type svgChart struct {
	ID, Label string
	W, H      int
	// Wide charts keep a minimum width and scroll on narrow screens
	// rather than shrink their text out of reading.
	Wide   bool
	Grid   []svgLine
	Rects  []svgRect
	Paths  []svgPath
	Lines  []svgLine
	Dots   []svgDot
	Texts  []svgText
	Legend []htmlLegend
}

type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type svgPath struct{ D, Class string }

type svgLine struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

type svgDot struct {
	X, Y, R float64
	Class   string
	Title   string
}

type svgText struct {
	X, Y   float64
	Text   string
	Anchor string
	Class  string
}

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

// Chart geometry, in SVG user units.
const (
	// halfW is the width of the charts drawn two side by side, wideW of
	// those that take a section's whole width; the page shows them at
	// that size or smaller, so their text stays the size it was set in.
	halfW     = 540
	wideW     = 1080
	chartH    = 230
	stripH    = 130
	chartPadL = 52
	chartPadR = 26
	chartPadT = 24
	chartPadB = 42
)

// histogramChart draws the bucket counts of h: the buckets from the first
// to the last non-empty one, with an empty neighbour on each side for
// context.
func histogramChart(id, label string, h *Histogram, unit string) *svgChart {
	first, last, peak := h.nonEmpty()
	if first < 0 {
		return nil
	}
	lo, hi := max(0, first-1), min(len(h.Counts)-1, last+1)
	n := hi - lo + 1
	c := &svgChart{ID: id, Label: label, W: halfW, H: chartH}
	x0, x1, y0, y1 := float64(chartPadL), float64(halfW-chartPadR), float64(chartPadT), float64(chartH-chartPadB)
	top, ticks := niceAxis(float64(peak), 4, true)
	yOf := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	c.yGrid(ticks, yOf, x0, x1, fmtCount)
	slot := (x1 - x0) / float64(n)
	every := (n + 11) / 12 // label at most 12 buckets
	for i := lo; i <= hi; i++ {
		k := i - lo
		cnt := h.Counts[i]
		xm := x0 + slot*(float64(k)+0.5)
		if cnt > 0 {
			bw := slot * 0.78
			y := yOf(float64(cnt))
			c.Rects = append(c.Rects, svgRect{X: xm - bw/2, Y: y, W: bw, H: y1 - y, Class: "bar s0",
				Title: fmt.Sprintf("%s %s: %d values", bucketLabel(h.Bounds, i), unit, cnt)})
			c.Texts = append(c.Texts, svgText{X: xm, Y: y - 4, Text: strconv.FormatUint(cnt, 10), Anchor: "middle", Class: "val"})
		}
		if k%every == 0 || i == first || i == last {
			c.Texts = append(c.Texts, svgText{X: xm, Y: y1 + 15, Text: shortBucketLabel(h.Bounds, i), Anchor: "middle", Class: "tick"})
		}
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: y1, X2: x1, Y2: y1, Class: "axis"})
	c.Texts = append(c.Texts,
		svgText{X: (x0 + x1) / 2, Y: chartH - 6, Text: "bucket (upper bound, " + unit + ")", Anchor: "middle", Class: "cap"},
		svgText{X: 4, Y: 10, Text: "values", Anchor: "start", Class: "cap"})
	c.Legend = []htmlLegend{{"s0", "values recorded in the bucket (last export, all processes)"}}
	return c
}

func shortBucketLabel(bounds []float64, i int) string {
	switch {
	case len(bounds) == 0:
		return "all"
	case i >= len(bounds):
		return "> " + fmtNum(bounds[len(bounds)-1])
	}
	return "≤ " + fmtNum(bounds[i])
}

// maxStripDots caps the dots of a strip chart; longer runs are thinned by
// rank, which keeps the shape of the distribution.
const maxStripDots = 600

// stripChart draws every duration as a dot on a time axis, with the
// exact p50, p90 and p99 marked.
func stripChart(id, label string, ds []time.Duration) *svgChart {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	c := &svgChart{ID: id, Label: label, W: halfW, H: stripH}
	x0, x1 := float64(chartPadL), float64(halfW-chartPadR)
	yTop, yAxis := 50.0, float64(stripH-30)
	lo, hi, ticks := niceRange(ms(ds[0]), ms(ds[len(ds)-1]), 6)
	xOf := func(v float64) float64 { return x0 + (v-lo)/(hi-lo)*(x1-x0) }
	for _, t := range ticks {
		x := xOf(t)
		c.Grid = append(c.Grid, svgLine{X1: x, Y1: yTop - 8, X2: x, Y2: yAxis, Class: "grid"})
		c.Texts = append(c.Texts, svgText{X: x, Y: yAxis + 15, Text: fmtTickMS(t), Anchor: "middle", Class: "tick"})
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: yAxis, X2: x1, Y2: yAxis, Class: "axis"})
	n := min(len(ds), maxStripDots)
	band := yAxis - 6 - yTop
	for k := range n {
		i := k
		if len(ds) > n {
			i = int(math.Round(float64(k) * float64(len(ds)-1) / float64(n-1)))
		}
		// A fixed scatter across the band keeps equal values apart.
		y := yTop + band*float64((k*7)%11)/10
		c.Dots = append(c.Dots, svgDot{X: xOf(ms(ds[i])), Y: y, R: 3.5, Class: "dot s0", Title: fmtDuration(ds[i])})
	}
	marks := []struct {
		q     float64
		name  string
		class string
	}{{0.5, "p50", "q50"}, {0.9, "p90", "q90"}, {0.99, "p99", "q99"}}
	for i, m := range marks {
		v := DurationQuantile(ds, m.q)
		x := xOf(ms(v))
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: yTop - 8, X2: x, Y2: yAxis, Class: "mark " + m.class})
		anchor, dx := "start", 3.0
		if x > x1-60 {
			anchor, dx = "end", -3
		}
		c.Texts = append(c.Texts, svgText{X: x + dx, Y: 10 + 11*float64(i), Text: m.name, Anchor: anchor, Class: "mk " + m.class})
		c.Legend = append(c.Legend, htmlLegend{Class: "mark " + m.class, Label: m.name + " " + fmtDuration(v)})
	}
	dots := fmt.Sprintf("one dot per span (%d)", len(ds))
	if len(ds) > n {
		dots = fmt.Sprintf("%d of %d spans, evenly by rank", n, len(ds))
	}
	c.Legend = append([]htmlLegend{{"s0", dots}}, c.Legend...)
	return c
}

// windowsChart draws the fleet's verifications per window as stacked bars
// (succeeded, failed; left axis) and the success fraction as a step line
// (right axis).
func windowsChart(id string, ws []Window) *svgChart {
	c := &svgChart{ID: id, Label: "fleet verify calls and success per window", W: wideW, H: chartH, Wide: true}
	x0, x1, y0, y1 := float64(chartPadL), float64(wideW-52), float64(chartPadT), float64(chartH-chartPadB)
	peak := 0.0
	for _, w := range ws {
		peak = math.Max(peak, w.Calls())
	}
	top, ticks := niceAxis(peak, 4, true)
	yOf := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	fOf := func(f float64) float64 { return y1 - f*(y1-y0) }
	c.yGrid(ticks, yOf, x0, x1, fmtCount)
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.Texts = append(c.Texts, svgText{X: x1 + 5, Y: fOf(f) + 4, Text: fmt.Sprintf("%.0f%%", f*100), Anchor: "start", Class: "tick rt"})
	}
	slot := (x1 - x0) / float64(len(ws))
	every := (len(ws) + 7) / 8
	var line strings.Builder
	prevFrac := false
	for i, w := range ws {
		sx := x0 + slot*float64(i)
		bw := slot * 0.7
		bx := sx + (slot-bw)/2
		span := fmtOffset(w.From) + " to " + fmtOffset(w.To)
		if w.Success > 0 {
			c.Rects = append(c.Rects, svgRect{X: bx, Y: yOf(w.Success), W: bw, H: y1 - yOf(w.Success), Class: "bar okc",
				Title: fmt.Sprintf("%s: %s succeeded", span, fmtCount(w.Success))})
		}
		if w.Failure > 0 {
			c.Rects = append(c.Rects, svgRect{X: bx, Y: yOf(w.Calls()), W: bw, H: yOf(w.Success) - yOf(w.Calls()), Class: "bar err",
				Title: fmt.Sprintf("%s: %s failed", span, fmtCount(w.Failure))})
		}
		if i%every == 0 {
			c.Texts = append(c.Texts, svgText{X: sx, Y: y1 + 15, Text: fmtAxisOffset(w.From), Anchor: "middle", Class: "tick"})
		}
		f := w.Fraction()
		if math.IsNaN(f) {
			prevFrac = false
			continue
		}
		y := fOf(f)
		if prevFrac {
			fmt.Fprintf(&line, " V%.1f H%.1f", y, sx+slot)
		} else {
			fmt.Fprintf(&line, " M%.1f %.1f H%.1f", sx, y, sx+slot)
		}
		prevFrac = true
		c.Dots = append(c.Dots, svgDot{X: sx + slot/2, Y: y, R: 3.5, Class: "dot ln-dot",
			Title: fmt.Sprintf("%s: %s of %s succeeded (%s)", span, fmtCount(w.Success), fmtCount(w.Calls()), fmtPercent(f))})
	}
	c.Texts = append(c.Texts, svgText{X: x1, Y: y1 + 15, Text: fmtAxisOffset(ws[len(ws)-1].To), Anchor: "middle", Class: "tick"})
	if line.Len() > 0 {
		c.Paths = append(c.Paths, svgPath{D: strings.TrimSpace(line.String()), Class: "ln frac"})
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: y1, X2: x1, Y2: y1, Class: "axis"})
	c.Texts = append(c.Texts,
		svgText{X: (x0 + x1) / 2, Y: chartH - 6, Text: "time since the run's first telemetry record", Anchor: "middle", Class: "cap"},
		svgText{X: 4, Y: 10, Text: "calls", Anchor: "start", Class: "cap"},
		svgText{X: wideW - 4, Y: 10, Text: "success", Anchor: "end", Class: "cap"})
	c.Legend = []htmlLegend{{"okc", "succeeded"}, {"err", "failed (the verifier errored)"}, {"frac", "success fraction (right axis)"}}
	return c
}

// activeChart draws each process's gym.servers.active readings as a step
// line over the run's time.
func activeChart(id string, r *Run, readings []GaugeReading, swatch map[*Process]string) *svgChart {
	c := &svgChart{ID: id, Label: contract.ServersActive + " over time", W: wideW, H: chartH, Wide: true}
	x0, x1, y0, y1 := float64(chartPadL), float64(wideW-chartPadR), float64(chartPadT), float64(chartH-chartPadB)
	peak, end := 0.0, 0.0
	for _, g := range readings {
		peak = math.Max(peak, g.Value)
		end = math.Max(end, float64(r.Offset(g.Time))/float64(time.Millisecond))
	}
	end = math.Max(end, float64(r.Duration())/float64(time.Millisecond))
	top, yticks := niceAxis(peak, 4, true)
	right, xticks := niceAxis(end, 6, false)
	yOf := func(v float64) float64 { return y1 - math.Max(0, v)/top*(y1-y0) }
	xOf := func(at time.Time) float64 {
		ms := float64(r.Offset(at)) / float64(time.Millisecond)
		return x0 + math.Max(0, ms)/right*(x1-x0)
	}
	c.yGrid(yticks, yOf, x0, x1, fmtCount)
	for _, t := range xticks {
		x := x0 + t/right*(x1-x0)
		c.Texts = append(c.Texts, svgText{X: x, Y: y1 + 15, Text: fmtTickMS(t), Anchor: "middle", Class: "tick"})
	}
	if !r.Start.IsZero() {
		x := xOf(r.End)
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: y0, X2: x, Y2: y1, Class: "mark runend"})
	}
	var order []*Process
	byProc := map[*Process][]GaugeReading{}
	for _, g := range readings {
		if byProc[g.Process] == nil {
			order = append(order, g.Process)
		}
		byProc[g.Process] = append(byProc[g.Process], g)
	}
	for _, proc := range order {
		gs := byProc[proc]
		var line, area strings.Builder
		for i, g := range gs {
			x, y := xOf(g.Time), yOf(g.Value)
			if i == 0 {
				fmt.Fprintf(&line, "M%.1f %.1f", x, y)
				fmt.Fprintf(&area, "M%.1f %.1f V%.1f", x, y1, y)
			} else {
				fmt.Fprintf(&line, " H%.1f V%.1f", x, y)
				fmt.Fprintf(&area, " H%.1f V%.1f", x, y)
			}
			c.Dots = append(c.Dots, svgDot{X: x, Y: y, R: 3, Class: "dot " + swatch[proc],
				Title: fmt.Sprintf("%s: %s active (%s)", fmtOffset(r.Offset(g.Time)), fmtCount(g.Value), proc.Name())})
		}
		fmt.Fprintf(&area, " V%.1f Z", y1)
		c.Paths = append(c.Paths, svgPath{D: area.String(), Class: "area " + swatch[proc]},
			svgPath{D: line.String(), Class: "ln " + swatch[proc]})
		c.Legend = append(c.Legend, htmlLegend{Class: swatch[proc], Label: proc.Name()})
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: y1, X2: x1, Y2: y1, Class: "axis"})
	c.Texts = append(c.Texts,
		svgText{X: (x0 + x1) / 2, Y: chartH - 6, Text: "time since the run's first telemetry record", Anchor: "middle", Class: "cap"},
		svgText{X: 4, Y: 10, Text: "servers", Anchor: "start", Class: "cap"})
	if !r.Start.IsZero() {
		c.Legend = append(c.Legend, htmlLegend{"mark runend", "last telemetry record"})
	}
	return c
}

// yGrid adds horizontal grid lines with labels at the given values.
func (c *svgChart) yGrid(ticks []float64, yOf func(float64) float64, x0, x1 float64, label func(float64) string) {
	for _, t := range ticks {
		y := yOf(t)
		c.Grid = append(c.Grid, svgLine{X1: x0, Y1: y, X2: x1, Y2: y, Class: "grid"})
		c.Texts = append(c.Texts, svgText{X: x0 - 6, Y: y + 4, Text: label(t), Anchor: "end", Class: "tick"})
	}
}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	}
	return 10 * mag
}

// niceAxis returns the top of an axis from 0 that holds peak, and its
// ticks. Whole keeps the step at 1 or more, for counts.
func niceAxis(peak float64, n int, whole bool) (float64, []float64) {
	if peak <= 0 || math.IsNaN(peak) {
		peak = 1
	}
	step := niceStep(peak, n)
	if whole {
		step = math.Max(1, math.Round(step))
	}
	top := roundSig(math.Ceil(peak/step-1e-9) * step)
	var ticks []float64
	for i := 0; float64(i)*step <= top+step/2; i++ {
		ticks = append(ticks, roundSig(float64(i)*step))
	}
	return top, ticks
}

// niceRange returns round bounds around [lo, hi] and the ticks between
// them. A range that starts near 0 is drawn from 0.
func niceRange(lo, hi float64, n int) (float64, float64, []float64) {
	if hi <= lo {
		pad := math.Max(math.Abs(lo)*0.05, 1e-3)
		lo, hi = lo-pad, hi+pad
	}
	if lo > 0 && lo < (hi-lo) {
		lo = 0
	}
	step := niceStep(hi-lo, n)
	lo = math.Floor(lo/step) * step
	hi = math.Ceil(hi/step) * step
	if lo < 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + step
	}
	var ticks []float64
	for i := 0; ; i++ {
		v := roundSig(lo + float64(i)*step)
		if v > hi+step/2 {
			break
		}
		ticks = append(ticks, v)
	}
	return lo, hi, ticks
}

// fmtTickMS labels an axis tick given in milliseconds.
func fmtTickMS(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms >= 60_000:
		return time.Duration(ms * float64(time.Millisecond)).Round(time.Second).String()
	case ms >= 1000:
		return strconv.FormatFloat(roundSig(ms/1000), 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(roundSig(ms), 'f', -1, 64) + "ms"
}

// roundSig rounds to 6 significant digits, hiding float noise from tick
// arithmetic (0.30000000000000004).
func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

func fmtAxisOffset(d time.Duration) string {
	return fmtTickMS(float64(d) / float64(time.Millisecond))
}

func fmtPercent(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", f*100)
}

// pageScript is the page's only script: it shows the buttons that open or
// close every waterfall. Everything else works without it. The
// Content-Security-Policy allows this script by its hash and nothing else.
const pageScript = `(function () {
  var tools = document.getElementById("wf-tools");
  if (!tools) { return; }
  tools.hidden = false;
  tools.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-open]");
    if (!b) { return; }
    var open = b.getAttribute("data-open") === "1";
    document.querySelectorAll("details.trace").forEach(function (d) { d.open = open; });
  });
})();`

const pageStyle = `
:root {
  --fg: #1f2a37; --muted: #6b7785; --faint: #9aa5b1; --line: #e4e8ee; --bg: #f6f7f9; --card: #ffffff;
  --accent: #3d5a80; --bad: #c0392b; --bad-bg: #fdf0ee; --ok: #5b9b7c;
  --s0: #5b7fa6; --s1: #e0935b; --s2: #6aa37f; --s3: #9b7fb8; --s4: #59a7a7; --s5: #c27a86; --s6: #a89a5e; --s7: #7f8c99;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
header.top { background: var(--accent); color: #fff; }
header.top .in { max-width: 1180px; margin: 0 auto; padding: 18px 24px 12px; }
h1 { margin: 0; font-size: 22px; font-weight: 600; letter-spacing: .2px; }
h1 .lbl { font-weight: 400; opacity: .75; margin-right: .35em; }
nav { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 13px; }
nav a { color: #dfe7f1; text-decoration: none; }
nav a:hover { color: #fff; text-decoration: underline; }
h2 { font-size: 17px; font-weight: 600; margin: 0 0 2px; }
h3 { font-size: 14px; font-weight: 600; margin: 16px 0 6px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px 18px; margin: 16px 0; }
.sub { color: var(--muted); font-size: 12.5px; margin: 0 0 10px; }
.muted { color: var(--muted); }
.bad, .bad a { color: var(--bad); }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 12.5px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(118px, 1fr)); gap: 10px; margin-bottom: 14px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; background: #fbfcfd; }
.card .v { font-size: 21px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .l { color: var(--muted); font-size: 12px; }
.card .d { color: var(--faint); font-size: 11.5px; }
.card.bad { border-color: #efc2bc; background: var(--bad-bg); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.failures { margin-top: 14px; border-left: 3px solid var(--bad); background: var(--bad-bg); padding: 8px 12px; border-radius: 0 6px 6px 0; }
.failures h3 { margin: 0 0 4px; color: var(--bad); }
.failures .err { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0 8px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { font-size: 12px; font-weight: 600; color: var(--muted); border-bottom-color: #d5dbe3; white-space: nowrap; }
td.n, th.n { text-align: right; white-space: nowrap; }
td.nw { white-space: nowrap; }
tr.total td { font-weight: 600; border-top: 1px solid #d5dbe3; }
tr.bad td, td.bad { color: var(--bad); }
td.bad { font-weight: 600; }
.meter { display: inline-block; width: 80px; height: 8px; background: #f1d9d5; border-radius: 4px; vertical-align: middle; margin-left: 8px; overflow: hidden; }
.meter i { display: block; height: 100%; background: var(--ok); }
.badge { display: inline-block; font-size: 11px; line-height: 16px; padding: 0 6px; border-radius: 8px; background: #edf0f4; color: var(--muted); margin-left: 4px; white-space: nowrap; }
.badge.bad { background: var(--bad); color: #fff; }
.badge.good { background: #e3f1ea; color: #2f6e51; }
.badge.warn { background: #fbead0; color: #8a5a12; }
.dist { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 8px 22px; }
.dist .stats { grid-column: 1 / -1; }
@media (max-width: 900px) { .dist { grid-template-columns: minmax(0, 1fr); } }
figure.chart { margin: 6px 0 0; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
figure.chart.wide { overflow-x: auto; }
figure.chart.wide svg { min-width: 640px; }
figcaption.legend, div.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: var(--muted); margin-top: 2px; }
.sw { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; background: var(--c); }
.sw.mark { height: 0; border-top: 2px solid var(--c); background: none; width: 14px; vertical-align: 3px; border-radius: 0; }
.sw.q90 { border-top-style: dashed; }
.sw.q99 { border-top-style: dotted; }
.sw.frac { height: 0; border-top: 2px solid var(--c); background: none; width: 14px; vertical-align: 3px; }
.sw.runend { border-top-style: dashed; }
.s0 { --c: var(--s0); } .s1 { --c: var(--s1); } .s2 { --c: var(--s2); } .s3 { --c: var(--s3); }
.s4 { --c: var(--s4); } .s5 { --c: var(--s5); } .s6 { --c: var(--s6); } .s7 { --c: var(--s7); }
.okc { --c: var(--ok); } .err { --c: var(--bad); } .frac { --c: var(--accent); }
.q50 { --c: #1f2a37; } .q90 { --c: #6b7785; } .q99 { --c: var(--bad); } .runend { --c: var(--faint); }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: var(--muted); }
svg text.val { fill: var(--fg); font-weight: 600; }
svg text.cap { font-size: 10.5px; fill: var(--faint); }
svg text.mk { fill: var(--c); font-weight: 600; }
svg .grid { stroke: #eef1f4; stroke-width: 1; }
svg .axis { stroke: #c3cad3; stroke-width: 1; }
svg rect.bar { fill: var(--c); opacity: .85; }
svg rect.bar:hover, svg .dot:hover { opacity: 1; }
svg .dot { fill: var(--c); opacity: .65; stroke: #fff; stroke-width: .8; }
svg .ln-dot { fill: var(--accent); opacity: 1; }
svg path.ln { fill: none; stroke: var(--c); stroke-width: 2; }
svg path.area { fill: var(--c); opacity: .12; stroke: none; }
svg line.mark { stroke: var(--c); stroke-width: 1.5; }
svg line.q90 { stroke-dasharray: 5 3; }
svg line.q99 { stroke-dasharray: 2 2; }
svg line.runend { stroke-dasharray: 4 3; stroke-width: 1; }
details.numbers { margin-top: 8px; }
details.numbers > summary { cursor: pointer; color: var(--accent); font-size: 13px; }
.tools { float: right; }
.tools button { font: inherit; font-size: 12px; border: 1px solid var(--line); background: #fbfcfd; color: var(--fg); border-radius: 5px; padding: 2px 10px; cursor: pointer; margin-left: 6px; }
.tools button:hover { background: #eef2f7; }
details.trace { border: 1px solid var(--line); border-radius: 6px; margin: 10px 0; background: #fff; }
details.trace > summary { cursor: pointer; padding: 9px 12px; list-style: none; display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 12px; }
details.trace > summary::-webkit-details-marker, details.span > summary::-webkit-details-marker { display: none; }
details.trace > summary::before { content: "\25B8"; color: var(--muted); display: inline-block; width: 1em; transition: transform .12s; }
details.trace[open] > summary::before { transform: rotate(90deg); }
details.trace[open] > summary { border-bottom: 1px solid var(--line); background: #fafbfc; }
details.trace.failed { border-left: 3px solid var(--bad); }
.rank { font-weight: 700; color: var(--muted); }
.tdur { font-weight: 600; font-variant-numeric: tabular-nums; }
.tmeta { color: var(--muted); font-size: 12.5px; }
.wf { padding: 6px 12px 10px; overflow-x: auto; }
.wf .why { margin: 4px 0 8px; }
.wrow { display: grid; grid-template-columns: 78px 70px 110px minmax(200px, 1.1fr) minmax(240px, 2fr); gap: 0 10px; align-items: center; min-width: 760px; }
.wrow > span { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.wrow .n { text-align: right; font-variant-numeric: tabular-nums; }
.whead { font-size: 12px; color: var(--muted); font-weight: 600; border-bottom: 1px solid #d5dbe3; padding: 2px 0 4px; }
.scale { position: relative; height: 16px; }
.scale span { position: absolute; top: 0; transform: translateX(-50%); font-weight: 400; font-size: 11px; white-space: nowrap; }
.scale span:first-child { transform: none; }
.scale span.end { transform: translateX(-100%); }
details.span > summary { list-style: none; cursor: pointer; padding: 2px 0; border-bottom: 1px solid #f1f3f6; font-size: 13px; }
details.span > summary:hover { background: #f5f8fb; }
details.span[open] > summary { background: #eef3f9; }
.svc .sw { vertical-align: 0; }
.kind { color: var(--faint); font-size: 11.5px; margin-left: 4px; }
.track { position: relative; height: 14px; background: repeating-linear-gradient(to right, #eef1f4 0 1px, transparent 1px 25%); border-right: 1px solid #eef1f4; }
.track i { position: absolute; top: 2px; bottom: 2px; min-width: 2px; border-radius: 2px; background: var(--c); opacity: .9; }
.track i.err { background: var(--bad); }
.attrs { margin: 4px 0 10px 88px; padding: 6px 10px; border-left: 2px solid var(--line); background: #fafbfc; max-width: 900px; }
.attrs table td { padding: 2px 10px; border: 0; font-size: 12.5px; }
.attrs table td:first-child { color: var(--muted); white-space: nowrap; width: 1%; }
.attrs table td:last-child { overflow-wrap: anywhere; }
.attrs .ah td { padding-top: 8px; font-weight: 600; color: var(--fg); }
ul.plain { margin: 0; padding-left: 18px; }
ul.problems li { color: var(--bad); margin: 3px 0; }
.none { color: var(--ok); }
footer { color: var(--faint); font-size: 12px; text-align: center; margin-top: 24px; }
@media (max-width: 640px) { main { padding: 12px; } section { padding: 12px; } }
`

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="CSP_PLACEHOLDER">
<title>gym report: {{.ID}}</title>
<style>{{style}}</style>
</head>
<body>
<header class="top"><div class="in">
<h1><span class="lbl">Run</span>{{.ID}}</h1>
<nav aria-label="sections">{{range .Nav}}<a href="#{{.ID}}">{{.Label}}</a>{{end}}</nav>
</div></header>
<main>
<section id="summary" aria-labelledby="h-summary">
<h2 id="h-summary">Summary</h2>
<p class="sub">Everything below comes from the files in the run directory; times are offsets from the earliest telemetry timestamp.</p>
<div class="cards">{{range .Cards}}<div class="card{{if .Bad}} bad{{end}}"><div class="v">{{.Value}}</div><div class="l">{{.Label}}</div>{{with .Detail}}<div class="d">{{.}}</div>{{end}}</div>{{end}}</div>
<dl class="facts">{{range .Facts}}<dt>{{.Label}}</dt><dd>{{.Value}}</dd>{{end}}</dl>
{{- if .Failures}}
<div class="failures">
<h3>Failed rollouts, by error</h3>
{{- range .Failures}}
<div>{{.Count}} {{.Noun}}: {{range $i, $t := .Tasks}}{{if $i}}, {{end}}<code>{{$t}}</code>{{end}}{{if .More}} and {{.More}} more{{end}}</div>
<div class="err mono">{{.Error}}</div>
{{- end}}
{{- if .MoreFails}}<div>... and {{.MoreFails}} more distinct errors</div>{{end}}
</div>
{{- end}}
</section>

<section id="processes" aria-labelledby="h-processes">
<h2 id="h-processes">Processes</h2>
<p class="sub">{{len .Processes}} seen, one telemetry file each.</p>
{{- if .Processes}}
<div class="scroll"><table>
<thead><tr><th>Process</th><th>File</th><th>Service</th><th>Type</th><th class="n">Spans</th><th class="n">Metric records</th><th class="n">Logs</th></tr></thead>
<tbody>
{{- range .Processes}}
<tr{{if .Empty}} class="bad"{{end}}><td class="nw"><i class="sw {{.Swatch}}"></i>{{.Name}}{{if .Empty}} <span class="badge bad">exported nothing</span>{{end}}{{if gt .Headers 1}} <span class="badge warn">{{.Headers}} writers</span>{{end}}</td><td><code>{{.File}}</code></td><td>{{.Service}}</td><td>{{.Type}}</td><td class="n">{{.Spans}}</td><td class="n">{{.Metrics}}</td><td class="n">{{.Logs}}</td></tr>
{{- end}}
</tbody></table></div>
{{- else}}
<p class="muted">No telemetry files.</p>
{{- end}}
</section>
{{range .Dists}}
<section id="{{.ID}}" aria-labelledby="h-{{.ID}}">
<h2 id="h-{{.ID}}">{{.Title}}</h2>
<p class="sub">{{.Source}}. The <code>{{.SpanName}}</code> spans give exact durations; the <code>{{.Metric}}</code> histogram only estimates inside a bucket, and is used when no span was exported.</p>
{{- if .NoSpans}}<p class="muted">No <code>{{.SpanName}}</code> spans exported.</p>{{end}}
{{- with .Resolution}}<p class="muted">{{.}}</p>{{end}}
{{- with .HistogramNote}}<p class="muted">{{.}}</p>{{end}}
{{- if .Err}}<p class="bad">Cannot combine the exported histograms: {{.Err}}</p>{{end}}
{{- if .Missing}}<p class="muted">Histogram <code>{{.Metric}}</code> not exported.</p>{{end}}
<div class="dist">
{{- if .Rows}}
<div class="stats scroll"><table>
<thead><tr><th>Source</th><th class="n">Values</th><th class="n">p50</th><th class="n">p90</th><th class="n">p99</th><th class="n">max</th></tr></thead>
<tbody>{{range .Rows}}<tr><td>{{.Source}}</td><td class="n">{{.N}}</td><td class="n">{{.P50}}</td><td class="n">{{.P90}}</td><td class="n">{{.P99}}</td><td class="n">{{.Max}}</td></tr>{{end}}</tbody>
</table></div>
{{- end}}
{{- with .Hist}}<div><h3>Histogram buckets</h3>{{template "chart" .}}</div>{{end}}
{{- with .Strip}}<div><h3>Span durations</h3>{{template "chart" .}}</div>{{end}}
</div>
</section>
{{end}}
<section id="verify-success" aria-labelledby="h-verify-success">
<h2 id="h-verify-success">Verify success</h2>
<p class="sub"><code>{{name "VerifyCalls"}}</code>; a failure is a verification that errored, not a wrong answer.</p>
{{- with .Verify}}
{{- if .Tallies}}
<h3>Per process, at its last export</h3>
<div class="scroll"><table>
<thead><tr><th>Process</th><th class="n">Succeeded</th><th class="n">Failed</th><th class="n">Completed</th><th class="n">Success</th><th class="n">{{name "VerifySuccessRate"}}</th></tr></thead>
<tbody>
{{- range .Tallies}}
<tr><td>{{.Name}}</td><td class="n">{{.Success}}</td><td class="n{{if .Failed}} bad{{end}}">{{.Failure}}</td><td class="n">{{.Calls}}</td><td class="n">{{.Fraction}}<span class="meter"><i style="{{.Meter}}"></i></span></td><td class="n">{{.Gauge}}</td></tr>
{{- end}}
{{- with .Fleet}}
<tr class="total"><td>{{.Name}}</td><td class="n">{{.Success}}</td><td class="n{{if .Failed}} bad{{end}}">{{.Failure}}</td><td class="n">{{.Calls}}</td><td class="n">{{.Fraction}}<span class="meter"><i style="{{.Meter}}"></i></span></td><td class="n"></td></tr>
{{- end}}
</tbody></table></div>
{{- with .Chart}}
<h3>Fleet over time, {{$.Verify.Width}} windows</h3>
<p class="sub">How much every process's counter went up in each window.</p>
{{template "chart" .}}
<details class="numbers"><summary>Numbers per window</summary>
<div class="scroll"><table>
<thead><tr><th>Window from</th><th class="n">Calls</th><th class="n">Failed</th><th class="n">Success</th></tr></thead>
<tbody>{{range $.Verify.Windows}}<tr{{if .Bad}} class="bad"{{end}}><td>{{.From}}</td><td class="n">{{.Calls}}</td><td class="n">{{.Failed}}</td><td class="n">{{.Fraction}}</td></tr>{{end}}</tbody>
</table></div></details>
{{- end}}
{{- else}}
<p class="muted">Not exported.</p>
{{- end}}
{{- end}}
</section>

<section id="http" aria-labelledby="h-http">
<h2 id="h-http">HTTP server requests</h2>
<p class="sub"><code>{{name "HTTPServerRequestDuration"}}</code> per server, route, method and status; percentiles are bucket estimates.</p>
{{- with .Routes}}
{{- if .Err}}<p class="bad">Cannot combine the exported histograms: {{.Err}}</p>
{{- else if .Rows}}
<div class="scroll"><table>
<thead><tr><th>Server</th><th>Route</th><th>Method</th><th class="n">Status</th><th class="n">Count</th><th class="n">p50</th><th class="n">p95</th><th class="n">p99</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr{{if .Bad}} class="bad"{{end}}><td>{{.Server}}</td><td><code>{{.Route}}</code></td><td>{{.Method}}</td><td class="n">{{.Status}}</td><td class="n">{{.Count}}</td><td class="n">{{.P50}}</td><td class="n">{{.P95}}</td><td class="n">{{.P99}}</td></tr>
{{- end}}
</tbody></table></div>
{{- else}}
<p class="muted">Not exported.</p>
{{- end}}
{{- end}}
</section>

<section id="servers-active" aria-labelledby="h-servers-active">
<h2 id="h-servers-active">Active servers</h2>
<p class="sub"><code>{{name "ServersActive"}}</code> at every export.</p>
{{- with .Active}}
{{- if .Chart}}
{{template "chart" .Chart}}
<details class="numbers"><summary>Readings</summary>
<div class="scroll"><table>
<thead><tr><th>When</th><th class="n">Active</th><th>Exports</th><th>By</th></tr></thead>
<tbody>{{range .Runs}}<tr><td>{{.Span}}</td><td class="n">{{.Value}}</td><td>{{.Exports}}</td><td>{{.Process}}</td></tr>{{end}}</tbody>
</table></div></details>
{{- else}}
<p class="muted">Not exported.</p>
{{- end}}
{{- end}}
</section>
{{with .Slowest}}
<section id="slowest" aria-labelledby="h-slowest">
<div class="tools" id="wf-tools" hidden><button type="button" data-open="1">Open all</button><button type="button" data-open="0">Close all</button></div>
<h2 id="h-slowest">Slowest rollouts</h2>
<p class="sub">The {{len .Traces}} longest <code>{{name "SpanRollout"}}</code> spans, each with its whole trace drawn to its own scale. Click a rollout to open its waterfall, and a span to see its attributes.</p>
{{- if .Traces}}
<div class="legend">{{range .Legend}}<span><i class="sw {{.Class}}"></i>{{.Label}}</span>{{end}}<span><i class="sw err"></i>error status</span></div>
{{- range .Traces}}
<details class="trace{{if .Failed}} failed{{end}}"{{if .Open}} open{{end}}>
<summary><span class="rank">#{{.Rank}}</span><span class="tdur">{{.Duration}}</span><span>rollout <code>{{.RolloutID}}</code></span><span>task <code>{{.TaskID}}</code></span>{{if .Failed}}<span class="badge bad">FAILED</span>{{else if .Rewarded}}<span class="badge good">rewarded</span>{{else if .Reward}}<span class="badge" title="reward {{.Reward}}">not rewarded</span>{{end}}<span class="tmeta">trace <code>{{.TraceID}}</code>, {{.Spans}} spans over {{.Total}}</span></summary>
<div class="wf">
{{- if .Error}}<p class="why bad">Error: <span class="mono">{{.Error}}</span></p>{{end}}
<div class="wrow whead"><span class="n">Offset</span><span class="n">Duration</span><span>Service</span><span>Span</span><span class="scale">{{range .Ticks}}<span style="{{.Style}}"{{if .End}} class="end"{{end}}>{{.Label}}</span>{{end}}</span></div>
{{- range .Rows}}
<details class="span"><summary class="wrow"><span class="n">{{.Offset}}</span><span class="n">{{.Duration}}</span><span class="svc"><i class="sw {{.Swatch}}"></i>{{.Service}}</span><span style="{{.Indent}}"{{if .Error}} class="bad"{{end}}>{{.Name}}{{if or (eq .Kind "client") (eq .Kind "server")}}<span class="kind">{{.Kind}}</span>{{end}}{{if .Orphan}} <span class="badge warn">parent missing</span>{{end}}{{if .Error}} <span class="badge bad">error</span>{{end}}{{if .Linked}} <span class="badge" title="links to a span outside this trace; open the row for where">↗ link</span>{{end}}</span><span class="track {{.Swatch}}"><i style="{{.Bar}}"{{if .Error}} class="err"{{end}}></i></span></summary>
<div class="attrs"><table><tbody>
{{- range .Details}}<tr{{if .Bad}} class="bad"{{end}}><td>{{.Key}}</td><td>{{.Value}}</td></tr>{{end}}
{{- if .Attrs}}<tr class="ah"><td colspan="2">Attributes</td></tr>{{range .Attrs}}<tr><td><code>{{.Key}}</code></td><td class="mono">{{.Value}}</td></tr>{{end}}{{end}}
</tbody></table></div>
</details>
{{- end}}
</div>
</details>
{{- end}}
{{- else}}
<p class="muted">No {{name "SpanRollout"}} spans exported.</p>
{{- end}}
</section>
{{end}}
{{- if .Notes}}
<section id="notes" aria-labelledby="h-notes">
<h2 id="h-notes">Notes</h2>
<p class="sub">Damage met while reading; the report covers everything else.</p>
<ul class="plain">{{range .Notes}}<li class="mono">{{.}}</li>{{end}}</ul>
</section>
{{- end}}

<section id="problems" aria-labelledby="h-problems">
<h2 id="h-problems">Problems</h2>
{{- if .Problems}}
<p class="sub">{{len .Problems}} found.</p>
<ul class="plain problems">{{range .Problems}}<li><strong>{{.Kind}}</strong>: {{with .Where}}<code>{{.}}</code>: {{end}}{{.Message}}</li>{{end}}</ul>
{{- else}}
<p class="none">None found.</p>
{{- end}}
</section>
<footer>gym report of <code>{{.Dir}}</code></footer>
</main>
<script>{{script}}</script>
</body>
</html>
{{define "chart"}}<figure class="chart{{if .Wide}} wide{{end}}">
<svg id="{{.ID}}" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Label}}">
{{- range .Grid}}<line class="{{.Class}}" x1="{{n .X1}}" y1="{{n .Y1}}" x2="{{n .X2}}" y2="{{n .Y2}}"/>{{end}}
{{- range .Paths}}<path class="{{.Class}}" d="{{.D}}"/>{{end}}
{{- range .Rects}}<rect class="{{.Class}}" x="{{n .X}}" y="{{n .Y}}" width="{{n .W}}" height="{{n .H}}">{{with .Title}}<title>{{.}}</title>{{end}}</rect>{{end}}
{{- range .Lines}}<line class="{{.Class}}" x1="{{n .X1}}" y1="{{n .Y1}}" x2="{{n .X2}}" y2="{{n .Y2}}"/>{{end}}
{{- range .Dots}}<circle class="{{.Class}}" cx="{{n .X}}" cy="{{n .Y}}" r="{{n .R}}">{{with .Title}}<title>{{.}}</title>{{end}}</circle>{{end}}
{{- range .Texts}}<text class="{{.Class}}" x="{{n .X}}" y="{{n .Y}}" text-anchor="{{.Anchor}}">{{.Text}}</text>{{end}}
</svg>
{{- if .Legend}}
<figcaption class="legend">{{range .Legend}}<span><i class="sw {{.Class}}"></i>{{.Label}}</span>{{end}}</figcaption>
{{- end}}
</figure>{{end}}
`

// pageCSP is the page's Content-Security-Policy: nothing may be loaded
// from anywhere, styles are inline, and the one script runs by its hash.
var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageScript))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" +
		base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'"
}()

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"n":      func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"name":   templateName,
	"style":  func() template.CSS { return template.CSS(pageStyle) },
	"script": func() template.JS { return template.JS(pageScript) },
}).Parse(strings.Replace(pageHTML, "CSP_PLACEHOLDER", pageCSP, 1)))

// templateNames are the contract names the page's fixed text mentions.
var templateNames = map[string]string{
	"VerifyCalls":               contract.VerifyCalls,
	"VerifySuccessRate":         contract.VerifySuccessRate,
	"HTTPServerRequestDuration": contract.HTTPServerRequestDuration,
	"ServersActive":             contract.ServersActive,
	"SpanRollout":               contract.SpanRollout,
}

// templateName returns the contract name the template asks for by key; a
// key missing here fails the page's rendering, and so every test of it.
func templateName(key string) (string, error) {
	if v, ok := templateNames[key]; ok {
		return v, nil
	}
	return "", fmt.Errorf("no contract name %q", key)
}
