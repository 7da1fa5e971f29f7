package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/gymlens/gymlens/contract"
)

// Defaults and limits of TextOptions.
const (
	// DefaultWidth is the line width used when TextOptions.Width is 0.
	DefaultWidth = 100
	// MinWidth is the narrowest layout WriteText produces.
	MinWidth = 60
	// DefaultSlowestK is the number of waterfalls gymlens report shows unless
	// told otherwise.
	DefaultSlowestK = 3
	// maxWindows caps the rows of the "over time" table; longer runs get
	// wider windows.
	maxWindows = 24
	// maxProblemsPerKind caps the problems listed of one kind.
	maxProblemsPerKind = 10
)

// TextOptions tunes WriteText.
type TextOptions struct {
	// SlowestK is the number of slowest rollouts drawn as waterfalls; 0
	// leaves the section out.
	SlowestK int
	// Width is the target line width in columns; 0 means DefaultWidth and
	// values under MinWidth are raised to it. Bars get whatever the text
	// columns leave.
	Width int
}

// WriteText writes the run's report as plain text. The output depends on
// the run's data and the options only: no clock readings, everything in a
// fixed order, times shown as offsets from the run's start. It returns the
// error of writing to w, if any.
func WriteText(w io.Writer, run Run, opts TextOptions) error {
	if opts.Width == 0 {
		opts.Width = DefaultWidth
	}
	opts.Width = max(opts.Width, MinWidth)
	t := &textWriter{run: &run, opts: opts}
	t.header()
	t.processes()
	t.durations()
	t.verifySuccess()
	t.httpRoutes()
	t.serversActive()
	t.slowest()
	t.notes()
	t.problems()
	// Empty table cells leave padding at line ends; drop it.
	var out bytes.Buffer
	out.Grow(t.buf.Len())
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, err := w.Write(out.Bytes())
	return err
}

// textWriter renders into a buffer, so the sections need not check for
// write errors.
type textWriter struct {
	buf  bytes.Buffer
	run  *Run
	opts TextOptions
}

func (t *textWriter) printf(format string, args ...any) {
	fmt.Fprintf(&t.buf, format, args...)
}

// table starts a tab-separated block whose columns line up.
func (t *textWriter) table() *tabwriter.Writer {
	return tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
}

func (t *textWriter) section(title, detail string) {
	t.printf("\n%s", title)
	if detail != "" {
		t.printf("  (%s)", detail)
	}
	t.printf("\n")
}

func (t *textWriter) header() {
	r := t.run
	t.printf("Run %s\n", r.ID)
	tw := t.table()
	fmt.Fprintf(tw, "  directory\t%s\n", r.Dir)
	if r.Start.IsZero() {
		fmt.Fprintf(tw, "  telemetry\tnone exported\n")
	} else {
		fmt.Fprintf(tw, "  started\t%s\n", startedText(r))
		fmt.Fprintf(tw, "  duration\t%s\n", durationText(r))
	}
	fmt.Fprintf(tw, "  rollouts\t%s\n", rolloutsText(r))
	fmt.Fprintf(tw, "  traces\t%d with %d spans\n", r.TraceCount(), r.SpanCount())
	_ = tw.Flush()
	t.failures()
}

// startedText, durationText and rolloutsText are the header lines both
// renderers show; startedText and durationText need telemetry (a non-zero
// Run.Start).
func startedText(r *Run) string {
	return r.Start.Format("2006-01-02T15:04:05.000Z07:00") + " (earliest telemetry timestamp)"
}

func durationText(r *Run) string {
	d := fmtDuration(r.Duration()) + " from first to last telemetry record"
	if job, ok := r.jobDuration(); ok {
		d += "; collection " + fmtDuration(job) + " (" + contract.SpanJob + " span)"
	}
	return d
}

func rolloutsText(r *Run) string {
	failed, rewarded, inFailures := r.rolloutCounts()
	where := "in " + contract.RunRolloutsFile
	if inFailures > 0 {
		where = fmt.Sprintf("(%d in %s, %d in %s)", len(r.Rollouts)-inFailures, contract.RunRolloutsFile, inFailures, contract.RunFailuresFile)
	}
	line := fmt.Sprintf("%d %s: %d failed, %d rewarded", len(r.Rollouts), where, failed, rewarded)
	if len(r.SeriesNamed(contract.RolloutCompleted)) > 0 {
		c := r.CounterTotals(contract.RolloutCompleted, contract.AttrRolloutOutcome)
		line += fmt.Sprintf("; agents counted %s failed of %s (%s)",
			fmtCount(c[contract.OutcomeFailure]), fmtCount(c[contract.OutcomeSuccess]+c[contract.OutcomeFailure]), contract.RolloutCompleted)
	}
	return line
}

// failures lists the failed rollouts' errors, one block per distinct
// message: the rollouts it hit, then the message wrapped to the width.
func (t *textWriter) failures() {
	const maxGroups, maxTasks = 5, 6
	const label, indent = "  failed     ", "               "
	groups := t.run.Failures()
	for i, g := range groups {
		if i == maxGroups {
			t.printf("%s... and %d more distinct errors\n", label, len(groups)-maxGroups)
			break
		}
		var tasks []string
		for _, ro := range g.Rollouts { // in task order already
			tasks = append(tasks, ro.label())
		}
		if len(tasks) > maxTasks {
			tasks = append(tasks[:maxTasks], "...")
		}
		noun := "rollouts"
		if len(g.Rollouts) == 1 {
			noun = "rollout"
		}
		t.printf("%s%d %s (%s) with:\n", label, len(g.Rollouts), noun, strings.Join(tasks, ", "))
		for _, line := range wrap(g.Error, t.opts.Width-len(indent)) {
			t.printf("%s%s\n", indent, line)
		}
	}
}

// wrap breaks text into lines of at most width columns at spaces; a word
// longer than width gets a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = word
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(word) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

func (t *textWriter) processes() {
	r := t.run
	t.section(fmt.Sprintf("Processes seen: %d", len(r.Processes)), "one telemetry file each")
	if len(r.Processes) == 0 {
		t.printf("  none\n")
		return
	}
	tw := t.table()
	fmt.Fprintf(tw, "  FILE\tSERVICE\tTYPE\tSPANS\tMETRIC RECORDS\n")
	for _, p := range r.Processes {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", p.File, orDash(p.ServiceName), orDash(p.ServerType), p.Spans, p.Metrics)
	}
	_ = tw.Flush()
	losses := r.SpanLosses()
	var lost, spans uint64
	for _, l := range losses {
		lost, spans = lost+l.Lost(), spans+l.Spans
		if l.Lost() > 0 {
			t.printf("  %s: %s\n", l.Process.Name(), l)
		}
	}
	if len(losses) > 0 && lost == 0 {
		t.printf("  telemetry lost no spans (%d processes accounted for %d)\n", len(losses), spans)
	}
	for _, signal := range []string{SignalMetricPoints, SignalLogRecords} {
		losses := r.SignalLosses(signal)
		var lost, total uint64
		for _, l := range losses {
			lost, total = lost+l.Lost(), total+l.Total
			if l.Lost() > 0 {
				t.printf("  %s: %s\n", l.Process.Name(), l)
			}
		}
		if len(losses) > 0 && lost == 0 {
			t.printf("  telemetry lost no %s (%d processes accounted for %d)\n", signal, len(losses), total)
		}
	}
}

func (t *textWriter) durations() {
	t.distribution("Rollout duration", contract.RolloutDuration, contract.SpanRollout, true)
	t.distribution("Verify duration", contract.VerifyDuration, contract.SpanVerify, false)
}

func (t *textWriter) distribution(title, metric, spanName string, agentsOnly bool) {
	d := t.run.Distribution(metric, spanName, agentsOnly)
	h := d.Histogram
	t.section(title, d.sourceText())
	switch d.Source {
	case FromSpans:
		t.printf("  %d %s spans, exact:\n", len(d.Spans), spanName)
		t.printf("    %s\n", d.percentileText())
	case FromBuckets:
		t.printf("  no %s spans exported; estimated from %s buckets, %s values at the last export:\n",
			spanName, metric, fmtCount(float64(h.Count)))
		t.printf("    %s\n", d.percentileText())
		t.printf("    %s\n", d.resolutionText())
	default:
		t.printf("  no %s spans exported\n", spanName)
	}
	switch {
	case d.HistogramErr != nil:
		t.printf("  cannot combine the exported %s histograms: %v\n", metric, d.HistogramErr)
	case h == nil || h.Count == 0:
		t.printf("  histogram %s not exported\n", metric)
	case d.Source == FromSpans:
		t.printf("  histogram %s: %s values at the last export\n", metric, fmtCount(float64(h.Count)))
	}
	if d.HistogramErr == nil && h != nil && h.Count > 0 && len(h.Counts) > 0 {
		t.bucketBars(h, "ms")
	}
}

// sourceText says where the distribution's percentiles come from, for a
// section's heading.
func (d Distribution) sourceText() string {
	switch d.Source {
	case FromSpans:
		return "percentiles from " + d.SpanName + " spans, exact"
	case FromBuckets:
		return "percentiles estimated from " + d.Metric + " buckets"
	}
	return d.SpanName + " spans, " + d.Metric
}

// percentileText is the percentiles and maximum on one line; an estimate's
// percentiles are marked "~".
func (d Distribution) percentileText() string {
	mark := ""
	if d.Source == FromBuckets {
		mark = "~"
	}
	var b strings.Builder
	for i, q := range ReportQuantiles {
		fmt.Fprintf(&b, "%s %s%s  ", quantileName(q), mark, fmtMS(d.Quantiles[i]))
	}
	b.WriteString("max " + fmtMS(d.Max))
	return b.String()
}

// resolutionText says how fine an estimate is: the bucket each
// percentile lies in, percentiles of one bucket together.
func (d Distribution) resolutionText() string {
	var parts []string
	for i := 0; i < len(ReportQuantiles); {
		j := i + 1
		for j < len(ReportQuantiles) && d.Buckets[j] == d.Buckets[i] {
			j++
		}
		names := make([]string, 0, j-i)
		for _, q := range ReportQuantiles[i:j] {
			names = append(names, quantileName(q))
		}
		parts = append(parts, strings.Join(names, ", ")+" in "+d.bucketText(d.Buckets[i]))
		i = j
	}
	return "resolution: each estimate lies somewhere in its bucket: " + strings.Join(parts, "; ")
}

// bucketText names bucket i of the distribution's histogram, in ms.
func (d Distribution) bucketText(i int) string {
	h := d.Histogram
	switch {
	case i < 0 || h == nil:
		return "no bucket"
	case i >= len(h.Bounds) && len(h.Bounds) > 0:
		return "the overflow bucket " + bucketLabel(h.Bounds, i) + " ms (only the maximum bounds it)"
	}
	return bucketLabel(h.Bounds, i) + " ms"
}

func quantileName(q float64) string { return "p" + strconv.FormatFloat(q*100, 'f', -1, 64) }

// bucketBars draws the non-empty span of a histogram's buckets.
func (t *textWriter) bucketBars(h *Histogram, unit string) {
	first, last, peak := h.nonEmpty()
	if first < 0 {
		return
	}
	labels := make([]string, 0, last-first+1)
	lw, cw := 0, 0
	for i := first; i <= last; i++ {
		l := bucketLabel(h.Bounds, i) + " " + unit
		labels = append(labels, l)
		lw = max(lw, utf8.RuneCountInString(l))
		cw = max(cw, len(strconv.FormatUint(h.Counts[i], 10)))
	}
	barW := max(10, min(50, t.opts.Width-lw-cw-10))
	t.printf("  buckets:\n")
	for i := first; i <= last; i++ {
		c := h.Counts[i]
		n := int(math.Round(float64(c) / float64(peak) * float64(barW)))
		if c > 0 && n == 0 {
			n = 1
		}
		t.printf("    %s  %*d  %s\n", padRight(labels[i-first], lw), cw, c, strings.Repeat("█", n))
	}
}

func bucketLabel(bounds []float64, i int) string {
	switch {
	case len(bounds) == 0:
		return "all"
	case i == 0:
		return "<= " + fmtNum(bounds[0])
	case i >= len(bounds):
		return "> " + fmtNum(bounds[len(bounds)-1])
	}
	return "(" + fmtNum(bounds[i-1]) + ", " + fmtNum(bounds[i]) + "]"
}

func (t *textWriter) verifySuccess() {
	r := t.run
	t.section("Verify success", contract.VerifyCalls+"; a failure is a verification that errored, not a wrong answer")
	tallies := r.VerifyTallies()
	if len(tallies) == 0 {
		t.printf("  not exported\n")
		return
	}
	t.printf("  cumulative per process, at its last export:\n")
	tw := t.table()
	for _, v := range tallies {
		gauge := "-"
		if !math.IsNaN(v.Rate) {
			gauge = fmtFrac(v.Rate)
		}
		fmt.Fprintf(tw, "    %s\t%s of %s completed\t%s\t%s %s\n", v.Process.Name(),
			fmtCount(v.Success), fmtCount(v.Success+v.Failure), fmtFrac(v.Fraction()), contract.VerifySuccessRate, gauge)
	}
	fleet := fleetTally(tallies)
	fmt.Fprintf(tw, "    fleet\t%s of %s completed\t%s\t\n", fmtCount(fleet.Success), fmtCount(fleet.Success+fleet.Failure), fmtFrac(fleet.Fraction()))
	_ = tw.Flush()

	width := verifyWindowWidth(r)
	windows := r.VerifyWindows(width)
	if len(windows) == 0 {
		return
	}
	t.printf("  fleet over time, %s windows (increase of every process's counter per window):\n", width)
	barW := max(10, min(40, t.opts.Width-50))
	tw = t.table()
	for _, w := range windows {
		frac, bar := "-", ""
		if f := w.Fraction(); !math.IsNaN(f) {
			frac = fmtFrac(f)
			bar = strings.Repeat("█", int(math.Round(f*float64(barW))))
		}
		fmt.Fprintf(tw, "    %s\t%s calls\t%s failed\t%s\t%s\n", fmtOffset(w.From),
			fmtCount(w.Calls()), fmtCount(w.Failure), frac, bar)
	}
	_ = tw.Flush()
}

func (t *textWriter) httpRoutes() {
	t.section("HTTP server requests", contract.HTTPServerRequestDuration+"; p50 and p95 are bucket estimates")
	routes, err := t.run.HTTPRoutes()
	switch {
	case err != nil:
		t.printf("  cannot combine the exported histograms: %v\n", err)
		return
	case len(routes) == 0:
		t.printf("  not exported\n")
		return
	}
	tw := t.table()
	fmt.Fprintf(tw, "  SERVER\tROUTE\tMETHOD\tSTATUS\tCOUNT\tP50\tP95\n")
	for _, rs := range routes {
		h := rs.Histogram
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", rs.Process.Name(), orDash(rs.Route), orDash(rs.Method),
			orDash(rs.Status), h.Count, fmtMS(h.Quantile(0.5)*1000), fmtMS(h.Quantile(0.95)*1000))
	}
	_ = tw.Flush()
}

func (t *textWriter) serversActive() {
	t.section("Active servers", contract.ServersActive+", every export")
	readings := t.run.ServersActive()
	if len(readings) == 0 {
		t.printf("  not exported\n")
		return
	}
	tw := t.table()
	for _, a := range activeRuns(t.run, readings) {
		fmt.Fprintf(tw, "  %s\t%s\t%s by %s\n", a.Span, a.Value, a.Exports, a.Process)
	}
	_ = tw.Flush()
}

// activeRun is a stretch of consecutive gym.servers.active readings with
// one value from one process, formatted for both renderers.
type activeRun struct {
	Span, Value, Exports, Process string
}

// activeRuns collapses readings (as ServersActive orders them) into runs.
func activeRuns(r *Run, readings []GaugeReading) []activeRun {
	var out []activeRun
	for i := 0; i < len(readings); {
		j := i + 1
		for j < len(readings) && readings[j].Value == readings[i].Value && readings[j].Process == readings[i].Process {
			j++
		}
		span := fmtOffset(r.Offset(readings[i].Time))
		exports := "1 export"
		if j-i > 1 {
			span += " .. " + fmtOffset(r.Offset(readings[j-1].Time))
			exports = strconv.Itoa(j-i) + " exports"
		}
		out = append(out, activeRun{Span: span, Value: fmtCount(readings[i].Value),
			Exports: exports, Process: readings[i].Process.Name()})
		i = j
	}
	return out
}

func (t *textWriter) slowest() {
	if t.opts.SlowestK <= 0 {
		return
	}
	slow := t.run.SlowestRollouts(t.opts.SlowestK)
	t.section(fmt.Sprintf("Slowest rollouts: %d", len(slow)), contract.SpanRollout+" spans; each trace drawn to its own scale")
	if len(slow) == 0 {
		t.printf("  no %s spans exported\n", contract.SpanRollout)
		return
	}
	for i, rt := range slow {
		s := rt.Span
		rolloutID, taskID := rt.ids()
		t.printf("  #%d  %s  rollout %s  task %s", i+1, fmtDuration(s.Duration()), rolloutID, taskID)
		if rt.Rollout != nil && rt.Rollout.Failed() || s.Status == "error" {
			t.printf("  FAILED")
		}
		t.printf("\n    trace %s, %d spans over %s\n", rt.Trace.ID, len(rt.Trace.Spans), fmtDuration(rt.Trace.Duration()))
		t.waterfall(rt.Trace)
	}
}

// waterfall draws one trace: a row per span, indented under its parent,
// with a bar placed on the trace's time axis.
func (t *textWriter) waterfall(tr *Trace) {
	rows := tr.Waterfall()
	type cells struct{ off, dur, svc, name string }
	cs := make([]cells, len(rows))
	wOff, wDur, wSvc, wName := len("OFFSET"), len("DURATION"), len("SERVICE"), len("SPAN")
	for i, row := range rows {
		s := row.Span
		name := strings.Repeat("  ", row.Depth) + s.Name
		if s.Kind == "client" || s.Kind == "server" {
			name += " [" + s.Kind + "]"
		}
		if row.Orphan {
			name += " (parent missing)"
		}
		if s.Status == "error" {
			name += " !"
		}
		if len(s.Links) > 0 {
			name += " ↗"
		}
		c := cells{off: "+" + fmtDuration(row.Offset), dur: fmtDuration(s.Duration()), svc: s.Process.Name(), name: name}
		cs[i] = c
		wOff = max(wOff, len(c.off))
		wDur = max(wDur, len(c.dur))
		wSvc = max(wSvc, utf8.RuneCountInString(c.svc))
		wName = max(wName, utf8.RuneCountInString(c.name))
	}
	// The span names give way first (down to minName columns), then the
	// bars (down to minBar).
	const indent, minName, wantBar, minBar = 4, 12, 10, 4
	fixed := indent + wOff + 2 + wDur + 2 + wSvc + 2 + 2 + 2 // gaps and the bar's frame
	wName = min(wName, max(minName, t.opts.Width-fixed-wantBar))
	barW := max(minBar, t.opts.Width-fixed-wName)
	pad := strings.Repeat(" ", indent)
	t.printf("%s%s  %s  %s  %s  %s\n", pad, padLeft("OFFSET", wOff), padLeft("DURATION", wDur),
		padRight("SERVICE", wSvc), padRight("SPAN", wName), scaleLine(barW, tr.Duration()))
	total := float64(tr.Duration())
	for i, row := range rows {
		c := cs[i]
		if utf8.RuneCountInString(c.name) > wName {
			c.name = string([]rune(c.name)[:wName-1]) + "…"
		}
		from, to := 0, barW
		if total > 0 {
			from = int(math.Floor(float64(row.Offset) / total * float64(barW)))
			to = int(math.Ceil(float64(row.Offset+row.Span.Duration()) / total * float64(barW)))
		}
		from = max(0, min(from, barW-1))
		to = max(from+1, min(to, barW))
		bar := strings.Repeat(" ", from) + strings.Repeat("█", to-from) + strings.Repeat(" ", barW-to)
		t.printf("%s%s  %s  %s  %s  |%s|\n", pad, padLeft(c.off, wOff), padLeft(c.dur, wDur),
			padRight(c.svc, wSvc), padRight(c.name, wName), bar)
	}
	// Links (↗) lead out of the trace, so they are listed under it.
	for _, row := range rows {
		for _, l := range row.Span.Links {
			t.printf("%s↗ %s links to %s\n", pad, row.Span.Name, t.run.describeLink(l))
		}
	}
}

// scaleLine labels a bar column: 0 on the left, the total on the right.
func scaleLine(barW int, total time.Duration) string {
	right := fmtDuration(total)
	gap := barW + 2 - 1 - len(right)
	if gap < 1 {
		return ""
	}
	return "0" + strings.Repeat(" ", gap) + right
}

func (t *textWriter) notes() {
	if len(t.run.Notes) == 0 {
		return
	}
	t.section("Notes", "damage met while reading; the report covers everything else")
	for _, n := range t.run.Notes {
		t.printf("  %s\n", n)
	}
}

func (t *textWriter) problems() {
	probs := t.run.Problems()
	if len(probs) == 0 {
		t.section("Problems", "")
		t.printf("  none found\n")
		return
	}
	t.section(fmt.Sprintf("Problems: %d", len(probs)+t.run.Unlisted(ProblemBrokenTrace)), "")
	eachShownProblem(probs, t.run.Unlisted, func(p Problem) {
		where := ""
		switch {
		case p.File != "" && p.Line > 0:
			where = fmt.Sprintf("%s:%d: ", p.File, p.Line)
		case p.File != "":
			where = p.File + ": "
		}
		t.printf("  %s: %s%s\n", p.Kind, where, p.Message)
	}, func(kind ProblemKind, more int) {
		t.printf("  %s: ... and %d more\n", kind, more)
	})
}

// eachShownProblem walks probs (sorted by kind, as Problems returns them)
// and calls show for the first maxProblemsPerKind of each kind, then more
// with the number left out of that kind (unlisted ones included), if any.
func eachShownProblem(probs []Problem, unlisted func(ProblemKind) int, show func(Problem), more func(kind ProblemKind, n int)) {
	for i := 0; i < len(probs); {
		j := i
		for j < len(probs) && probs[j].Kind == probs[i].Kind {
			j++
		}
		for _, p := range probs[i:min(j, i+maxProblemsPerKind)] {
			show(p)
		}
		if n := max(0, j-i-maxProblemsPerKind) + unlisted(probs[i].Kind); n > 0 {
			more(probs[i].Kind, n)
		}
		i = j
	}
}

// fmtMS formats a value in milliseconds with a precision that suits its
// size; NaN (nothing recorded) prints as "-".
func fmtMS(ms float64) string {
	switch {
	case math.IsNaN(ms):
		return "-"
	case ms < 1:
		return fmt.Sprintf("%.3fms", ms)
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.2fs", ms/1000)
	}
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Second).String()
}

func fmtMaxMS(h *Histogram) string {
	if !h.HasMinMax {
		return "-"
	}
	return fmtMS(h.Max)
}

func fmtDuration(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmtMS(float64(d) / float64(time.Millisecond))
}

// fmtOffset formats a time relative to the run's start.
func fmtOffset(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("+%.3fs", d.Seconds())
	}
	return "+" + d.Round(time.Second).String()
}

func fmtFrac(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.3f", f)
}

// fmtCount prints a counter value, which is whole in practice.
func fmtCount(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func padRight(s string, w int) string {
	if n := utf8.RuneCountInString(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

func padLeft(s string, w int) string {
	if n := utf8.RuneCountInString(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}
