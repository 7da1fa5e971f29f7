package report

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// rawSpan is a span as its telemetry file holds it.
type rawSpan struct {
	telfile.Span
	// file is the telemetry file's base name; line the 1-based line.
	file string
	line int
	// agent is set when the file's first header names an agent.
	agent bool
}

// rawRun is what the telemetry files of a run directory hold, read with
// telfile alone: the reference a loaded Run is checked against, worked
// out the plain way (every span in memory, ids compared as strings).
type rawRun struct {
	spans []rawSpan
	// start and end bound the span and metric timestamps.
	start, end int64
	anyAgent   bool
}

func readRaw(t *testing.T, dir string) rawRun {
	t.Helper()
	var raw rawRun
	widen := func(ns int64) {
		if raw.start == 0 || ns < raw.start {
			raw.start = ns
		}
		raw.end = max(raw.end, ns)
	}
	names, err := filepath.Glob(filepath.Join(dir, contract.RunTelemetryDir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range names { // Glob sorts, as Load's ReadDir does
		first := len(raw.spans)
		typ, headers := "", 0
		err := telfile.ReadFile(path, func(rec telfile.Record) error {
			switch {
			case rec.Resource != nil:
				if headers++; headers == 1 {
					typ, _ = rec.Resource.Attributes[contract.AttrServerType].(string)
				}
			case rec.Span != nil:
				raw.spans = append(raw.spans, rawSpan{Span: *rec.Span, file: filepath.Base(path), line: rec.Line})
				widen(rec.Span.StartNS)
				widen(rec.Span.EndNS)
			case rec.Metric != nil:
				for _, pt := range rec.Metric.Points {
					if pt.TimeNS != 0 {
						widen(pt.TimeNS)
					} else {
						widen(rec.Metric.TimeNS)
					}
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, telfile.ErrTruncated) {
			t.Fatal(err)
		}
		for i := first; i < len(raw.spans); i++ {
			raw.spans[i].agent = typ == contract.ServerTypeAgent
		}
		raw.anyAgent = raw.anyAgent || typ == contract.ServerTypeAgent
	}
	return raw
}

func (s *rawSpan) duration() time.Duration {
	return time.Unix(0, s.EndNS).Sub(time.Unix(0, s.StartNS))
}

// byTrace groups the spans by trace id, in reading order.
func (raw *rawRun) byTrace() map[string][]*rawSpan {
	out := map[string][]*rawSpan{}
	for i := range raw.spans {
		s := &raw.spans[i]
		out[s.TraceID] = append(out[s.TraceID], s)
	}
	return out
}

// durations returns the sorted durations of the spans named name; of the
// agents' spans only when agents is set and some file is an agent's.
func (raw *rawRun) durations(name string, agents bool) []time.Duration {
	var out []time.Duration
	for i := range raw.spans {
		s := &raw.spans[i]
		if s.Name == name && (!agents || !raw.anyAgent || s.agent) {
			out = append(out, s.duration())
		}
	}
	slices.Sort(out)
	return out
}

// slowest returns the k longest agent gym.rollout spans in the order
// SlowestRollouts documents.
func (raw *rawRun) slowest(k int) []*rawSpan {
	var out []*rawSpan
	for i := range raw.spans {
		if s := &raw.spans[i]; s.Name == contract.SpanRollout && (!raw.anyAgent || s.agent) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *rawSpan) int {
		return cmp.Or(cmp.Compare(b.duration(), a.duration()), strings.Compare(a.TraceID, b.TraceID),
			strings.Compare(a.SpanID, b.SpanID), cmp.Compare(a.StartNS, b.StartNS))
	})
	return out[:min(k, len(out))]
}

// orphans returns the spans whose parent id is no span id of their trace,
// in file and line order.
func (raw *rawRun) orphans() []*rawSpan {
	ids := map[[2]string]bool{}
	for _, s := range raw.spans {
		ids[[2]string{s.TraceID, s.SpanID}] = true
	}
	var out []*rawSpan
	for i := range raw.spans {
		if s := &raw.spans[i]; s.ParentSpanID != "" && !ids[[2]string{s.TraceID, s.ParentSpanID}] {
			out = append(out, s)
		}
	}
	return out
}

// job returns the duration of the gym.job span a report's header shows:
// the first of the earliest trace (ties by trace id), as if every trace
// were held.
func (raw *rawRun) job() (time.Duration, bool) {
	var best *rawSpan
	var bestStart int64
	for id, spans := range raw.byTrace() {
		start := spans[0].StartNS
		for _, s := range spans {
			start = min(start, s.StartNS)
		}
		for _, s := range spans {
			if s.Name != contract.SpanJob {
				continue
			}
			if best == nil || cmp.Or(cmp.Compare(start, bestStart), strings.Compare(id, best.TraceID),
				cmp.Compare(s.StartNS, best.StartNS), strings.Compare(s.SpanID, best.SpanID)) < 0 {
				best, bestStart = s, start
			}
		}
	}
	if best == nil {
		return 0, false
	}
	return best.duration(), true
}

// checkLoad loads dir keeping keep slowest rollouts and checks the Run
// against the raw files: counts, durations, the slowest rollouts, broken
// traces, the extent and the collection time, and that Run.Traces holds
// the drawn traces (the slowest and those they link to), whole, and no
// other. It also checks that keeping every rollout's trace changes no
// report drawing keep waterfalls. It returns the Run.
func checkLoad(t *testing.T, dir string, keep int) Run {
	t.Helper()
	run, err := LoadWith(dir, LoadOptions{KeepSlowest: keep})
	if err != nil {
		t.Fatalf("LoadWith(KeepSlowest %d): %v", keep, err)
	}
	raw := readRaw(t, dir)
	traces := raw.byTrace()
	if run.SpanCount() != len(raw.spans) || run.TraceCount() != len(traces) {
		t.Errorf("%d spans in %d traces, want %d in %d", run.SpanCount(), run.TraceCount(), len(raw.spans), len(traces))
	}
	names := map[string]bool{}
	for _, s := range raw.spans {
		names[s.Name] = true
	}
	for name := range names {
		for _, agents := range []bool{false, true} {
			if got, want := run.SpanDurations(name, agents), raw.durations(name, agents); !slices.Equal(got, want) {
				t.Errorf("SpanDurations(%q, %v): %d durations, want %d", name, agents, len(got), len(want))
			}
		}
	}

	want := map[string]bool{}
	slow, rawSlow := run.SlowestRollouts(keep+5), raw.slowest(keep)
	if len(slow) != len(rawSlow) {
		t.Errorf("SlowestRollouts: %d, want %d", len(slow), len(rawSlow))
	}
	for i := range min(len(slow), len(rawSlow)) {
		got, w := slow[i].Span, rawSlow[i]
		if got.TraceID != w.TraceID || got.SpanID != w.SpanID || got.Process.File != w.file || got.Line != w.line ||
			got.Duration() != w.duration() {
			t.Errorf("slowest #%d: span %s of trace %s, want %s of %s", i+1, got.SpanID, got.TraceID, w.SpanID, w.TraceID)
		}
		want[w.TraceID] = true
	}
	for id := range want {
		for _, s := range traces[id] {
			for _, l := range s.Links {
				if traces[l.TraceID] != nil {
					want[l.TraceID] = true
				}
			}
		}
	}
	held := map[string]bool{}
	for _, tr := range run.Traces {
		held[tr.ID] = true
		if len(tr.Spans) != len(traces[tr.ID]) {
			t.Errorf("trace %s holds %d spans, want %d", tr.ID, len(tr.Spans), len(traces[tr.ID]))
		}
	}
	if !maps.Equal(held, want) {
		t.Errorf("Run.Traces holds %d traces %v, want the %d drawn %v", len(held), slices.Sorted(maps.Keys(held)),
			len(want), slices.Sorted(maps.Keys(want)))
	}

	orphans := raw.orphans()
	broken := problemsOf(run, ProblemBrokenTrace)
	if listed := min(len(orphans), maxProblemsPerKind); len(broken) != listed || run.Unlisted(ProblemBrokenTrace) != len(orphans)-listed {
		t.Errorf("%d broken traces listed and %d unlisted, want %d and %d", len(broken),
			run.Unlisted(ProblemBrokenTrace), listed, len(orphans)-listed)
	}
	for i := range min(len(broken), len(orphans)) {
		p, o := broken[i], orphans[i]
		if p.File != contract.RunTelemetryDir+"/"+o.file || p.Line != o.line || p.TraceID != o.TraceID || p.SpanID != o.SpanID ||
			!strings.Contains(p.Message, "names parent "+o.ParentSpanID+",") {
			t.Errorf("broken trace #%d: %+v, want span %s of trace %s at %s:%d", i+1, p, o.SpanID, o.TraceID, o.file, o.line)
		}
	}

	if run.Start.UnixNano() != raw.start || run.End.UnixNano() != raw.end {
		t.Errorf("extent %v..%v, want %v..%v", run.Start, run.End, time.Unix(0, raw.start).UTC(), time.Unix(0, raw.end).UTC())
	}
	header := durationText(&run)
	if d, ok := raw.job(); ok != strings.Contains(header, "collection") ||
		ok && !strings.Contains(header, "collection "+fmtDuration(d)+" ") {
		t.Errorf("header %q; want a collection of %v (gym.job span found: %v)", header, d, ok)
	}

	// What is drawn does not depend on what else is held.
	all, err := LoadWith(dir, LoadOptions{KeepSlowest: len(raw.spans)})
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{MinWidth, DefaultWidth} {
		opts := TextOptions{SlowestK: keep, Width: width}
		if a, b := render(t, all, opts), render(t, run, opts); a != b {
			t.Errorf("text report (width %d) differs from the one of a load keeping every rollout:\n%s", width, firstDiff(a, b))
		}
	}
	if a, b := renderHTML(t, all, HTMLOptions{SlowestK: keep}), renderHTML(t, run, HTMLOptions{SlowestK: keep}); a != b {
		t.Errorf("HTML report differs from the one of a load keeping every rollout:\n%s", firstDiff(a, b))
	}
	return run
}

// firstDiff shows where two texts part.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		if w, g := lineAt(wl, i), lineAt(gl, i); w != g {
			return fmt.Sprintf("line %d\n got: %q\nwant: %q", i+1, g, w)
		}
	}
	return "(no line differs)"
}

// TestLoadAgreesWithRawFiles checks what Load makes of a run against the
// telemetry files read plainly, span by span.
func TestLoadAgreesWithRawFiles(t *testing.T) {
	t.Run("fixture", func(t *testing.T) {
		for _, keep := range []int{0, 1, 3, 12, 100} {
			checkLoad(t, fixture, keep)
		}
	})
	t.Run("broken traces", func(t *testing.T) {
		dir := copyFixture(t)
		if err := os.Remove(filepath.Join(dir, contract.RunTelemetryDir, "orchestrator.jsonl")); err != nil {
			t.Fatal(err)
		}
		checkLoad(t, dir, 3)
		checkLoad(t, dir, 0)
	})
	t.Run("truncated and headerless", func(t *testing.T) {
		dir := copyFixture(t)
		editFile(t, dir, "telemetry/simple_agent.jsonl", func(s string) string {
			s = strings.TrimSuffix(s, "\n")
			return s[:strings.LastIndexByte(s, '\n')+40]
		})
		editFile(t, dir, "telemetry/policy_model.jsonl", func(s string) string {
			return s[strings.IndexByte(s, '\n')+1:] // no header
		})
		checkLoad(t, dir, 3)
	})
	t.Run("ids not in canonical form", func(t *testing.T) {
		dir := copyFixture(t)
		run := loadFixture(t)
		slow := run.SlowestRollouts(3)
		// The slowest rollout's trace id becomes a name; a span id of the
		// second turns upper case everywhere; a parent of the third stops
		// being hex, which breaks that trace.
		first, second, third := slow[0].Trace, slow[1].Trace, slow[2].Trace
		upper := second.Spans[len(second.Spans)-1]
		var child *Span
		for _, s := range third.Spans {
			if s.ParentSpanID != "" {
				child = s
			}
		}
		for _, p := range run.Processes {
			editFile(t, dir, "telemetry/"+p.File, func(s string) string {
				s = strings.ReplaceAll(s, `"`+first.ID+`"`, `"trace one"`)
				s = strings.ReplaceAll(s, `"`+upper.SpanID+`"`, `"`+strings.ToUpper(upper.SpanID)+`"`)
				return strings.ReplaceAll(s, `"span_id":"`+child.SpanID+`","parent_span_id":"`+child.ParentSpanID+`"`,
					`"span_id":"`+child.SpanID+`","parent_span_id":"not hex"`)
			})
		}
		editFile(t, dir, contract.RunRolloutsFile, func(s string) string { return strings.ReplaceAll(s, first.ID, "trace one") })
		checkLoad(t, dir, 3)
		// The traces with odd ids are checked without being held.
		part := checkLoad(t, dir, 1)
		if broken := problemsOf(part, ProblemBrokenTrace); len(broken) != 1 || !strings.Contains(broken[0].Message, "not hex") {
			t.Errorf("broken traces %+v, want the one whose parent is not hex", broken)
		}
		if part.Trace("trace one") == nil || part.Trace(second.ID) != nil || part.Trace(third.ID) != nil {
			t.Error("KeepSlowest 1 did not keep the slowest trace alone")
		}
	})
	t.Run("synthetic, durations tie", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		writeSyntheticRun(t, dir, 240, 3, false)
		checkLoad(t, dir, 5)
		checkLoad(t, dir, 30)
	})
	t.Run("synthetic", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		writeSyntheticRun(t, dir, 300, 5, true)
		checkLoad(t, dir, DefaultSlowestK)
	})
}

// TestLoadKeepsFewTraces checks what a large run leaves in memory: the
// kept slowest rollouts' traces and the gym.job trace they link to, while
// the counts and durations cover every span.
func TestLoadKeepsFewTraces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	const rollouts = 400
	spans := writeSyntheticRun(t, dir, rollouts, 9, true)
	run, err := LoadWith(dir, LoadOptions{KeepSlowest: 4})
	if err != nil {
		t.Fatal(err)
	}
	if run.SpanCount() != spans || run.TraceCount() != rollouts+1 {
		t.Errorf("%d spans in %d traces, want %d in %d", run.SpanCount(), run.TraceCount(), spans, rollouts+1)
	}
	if n := len(run.SpanDurations(contract.SpanRollout, true)); n != rollouts {
		t.Errorf("%d rollout durations, want %d", n, rollouts)
	}
	if len(run.Traces) != 5 {
		t.Errorf("%d traces kept, want 5 (four rollouts and the gym.job trace)", len(run.Traces))
	}
	slow := run.SlowestRollouts(10)
	if len(slow) != 4 {
		t.Fatalf("SlowestRollouts(10) = %d rollouts, want the 4 kept", len(slow))
	}
	for _, rt := range slow {
		if rt.Trace == nil || rt.Rollout == nil || len(rt.Trace.Orphans()) != 0 {
			t.Errorf("slow rollout %+v", rt)
		}
		for _, s := range rt.Trace.Spans {
			for _, l := range s.Links {
				if target := run.LinkTarget(l); target == nil || target.Name != contract.SpanJob {
					t.Errorf("link of %s resolves to %+v, want the gym.job span", s.Name, target)
				}
			}
		}
	}
}

// TestFileChangedBetweenReadings: the second reading finds the lines the
// first one counted, or says the file changed.
func TestFileChangedBetweenReadings(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(string) string
		want string
	}{
		{"shorter", func(s string) string { return s[:strings.IndexByte(s, '\n')+1] }, "line gone"},
		{"other spans", func(s string) string {
			lines := strings.Split(s, "\n")
			slices.Reverse(lines[1 : len(lines)-1])
			return strings.Join(lines, "\n")
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t)
			run := Run{Dir: dir, traceByID: map[string]*Trace{}}
			l := loader{run: &run, series: map[string]*Series{}, spans: newCollector(&run, 3)}
			if err := l.readTelemetry(); err != nil {
				t.Fatal(err)
			}
			editFile(t, dir, "telemetry/simple_agent.jsonl", c.edit)
			_, err := l.spans.buildIndex(&l)
			var fe *FileError
			if !errors.As(err, &fe) || !strings.HasSuffix(fe.Path, "simple_agent.jsonl") || fe.Line == 0 ||
				!strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a *FileError naming a line of simple_agent.jsonl", err)
			}
		})
	}
}

// writeTelemetry writes a telemetry file of the run directory dir: a
// resource header naming the server type, then the spans.
func writeTelemetry(t *testing.T, dir, file, serverType string, spans []telfile.Span) {
	t.Helper()
	entries := make([]telfile.Entry, 0, len(spans))
	for _, s := range spans {
		if s.Kind == "" {
			s.Kind, s.Status = telfile.KindInternal, telfile.StatusUnset
		}
		entries = append(entries, s)
	}
	writeRecords(t, dir, file, serverType, entries...)
}

// TestOddSpanIDs: span ids that are not 16 lowercase hex digits, as
// another exporter or a hand-edited file may hold, are matched to their
// parents as strings are, without their traces being held.
func TestOddSpanIDs(t *testing.T) {
	const (
		t1 = "0123456789abcdef0123456789abcdef"
		t2 = "fedcba9876543210fedcba9876543210"
		t3 = "odd trace"
	)
	const base = int64(1_800_000_000_000_000_000)
	span := func(trace, id, parent, name string, start, end int64) telfile.Span {
		return telfile.Span{TraceID: trace, SpanID: id, ParentSpanID: parent, Name: name,
			StartNS: base + start, EndNS: base + end}
	}
	agent := []telfile.Span{
		span(t1, "root span", "", contract.SpanRollout, 0, 1000),
		// An odd span under a canonical parent.
		span(t1, "Child-2", "0000000000000001", "child", 10, 20),
		// An orphan whose odd parent's number is sure to be some
		// canonical span id of the trace (model.jsonl holds 0 to 15):
		// the two numberings must not meet.
		span(t1, "00000000000000aa", "gone", "orphan", 30, 40),
		// Upper case is odd: only the same spelling is the same id.
		span(t1, "00000000000000AB", "0000000000000002", "upper", 50, 60),
		span(t1, "00000000000000ac", "00000000000000AB", "under upper", 51, 59),
		span(t1, "00000000000000ad", "00000000000000ab", "under lower", 52, 58),
		span(t1, "00000000000000ef", "root span", "lower", 70, 80),
		span(t1, "00000000000000ae", "00000000000000EF", "under upper of lower", 71, 79),
		// The same odd ids in other traces: they match within a trace
		// only.
		span(t2, "root span", "", contract.SpanRollout, 100, 900),
		span(t2, "0000000000000001", "root span", "child", 110, 120),
		span(t3, "Child-2", "root span", "orphan elsewhere", 200, 210),
	}
	// Canonical spans under the odd root, in another file.
	var model []telfile.Span
	for i := range 16 {
		model = append(model, span(t1, fmt.Sprintf("%016x", i), "root span", "leaf", 5+int64(i), 6+int64(i)))
	}
	dir := filepath.Join(t.TempDir(), "run")
	writeTelemetry(t, dir, "agent.jsonl", contract.ServerTypeAgent, agent)
	writeTelemetry(t, dir, "model.jsonl", "responses_api_models", model)

	wantBroken := []string{"00000000000000aa", "00000000000000ad", "00000000000000ae", "Child-2"}
	brokenIDs := func(run Run) []string {
		var ids []string
		for _, p := range problemsOf(run, ProblemBrokenTrace) {
			ids = append(ids, p.SpanID)
		}
		return ids
	}
	run := checkLoad(t, dir, 0)
	if len(run.Traces) != 0 {
		t.Errorf("KeepSlowest 0 holds %d traces", len(run.Traces))
	}
	if got := brokenIDs(run); !slices.Equal(got, wantBroken) {
		t.Errorf("broken spans %v, want %v", got, wantBroken)
	}
	// Held in full, the traces say the same span by span.
	run = checkLoad(t, dir, 2)
	if got := brokenIDs(run); !slices.Equal(got, wantBroken) {
		t.Errorf("KeepSlowest 2: broken spans %v, want %v", got, wantBroken)
	}
	var orphans []string
	for _, id := range []string{t1, t2} {
		for _, s := range run.Trace(id).Orphans() {
			orphans = append(orphans, s.SpanID)
		}
	}
	if !slices.Equal(orphans, wantBroken[:3]) {
		t.Errorf("orphans of the held traces %v, want %v", orphans, wantBroken[:3])
	}
}

// TestOddSpanIDsKeepLoadBounded: a large run whose span ids are mostly
// odd is read like any other, holding the drawn traces only.
func TestOddSpanIDsKeepLoadBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	const rollouts = 300
	writeSyntheticRun(t, dir, rollouts, 7, true)
	// Each id is respelled the same way wherever it appears (own id,
	// parent, link), so every trace stays whole: a third in upper case
	// (which leaves the ids without letters canonical), a third made
	// names, a third as they were.
	ids := regexp.MustCompile(`"(span_id|parent_span_id)":"([0-9a-f]{16})"`)
	odd := 0
	respell := func(m string) string {
		sub := ids.FindStringSubmatch(m)
		id := sub[2]
		switch id[0] % 3 {
		case 0:
			id = strings.ToUpper(id)
		case 1:
			id = "span " + id
		}
		if _, canonical := parseHex64(id); !canonical {
			odd++
		}
		return `"` + sub[1] + `":"` + id + `"`
	}
	files, err := filepath.Glob(filepath.Join(dir, contract.RunTelemetryDir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		editFile(t, dir, filepath.Join(contract.RunTelemetryDir, filepath.Base(f)), func(s string) string {
			return ids.ReplaceAllStringFunc(s, respell)
		})
	}
	// One span loses its parent, under an odd name.
	editFile(t, dir, "telemetry/arithmetic.jsonl", func(s string) string {
		loc := regexp.MustCompile(`"parent_span_id":"[^"]*"`).FindStringIndex(s)
		return s[:loc[0]] + `"parent_span_id":"span gone"` + s[loc[1]:]
	})
	if odd < rollouts {
		t.Fatalf("only %d odd ids written", odd)
	}

	run := checkLoad(t, dir, 4)
	if len(run.Traces) != 5 {
		t.Errorf("%d traces held, want 5 (four rollouts and the gym.job trace they link to)", len(run.Traces))
	}
	if broken := problemsOf(run, ProblemBrokenTrace); len(broken) != 1 || !strings.Contains(broken[0].Message, "span gone") {
		t.Errorf("broken traces %+v, want the span whose parent is gone", broken)
	}
}

// TestJobTraceNotHeld: the header's collection time comes from the first
// reading, so the gym.job trace is held only when a drawn span links to
// it.
func TestJobTraceNotHeld(t *testing.T) {
	fix := loadFixture(t)
	job := fix.LinkTarget(fix.SlowestRollouts(1)[0].Trace.Spans[0].Links[0])
	if job == nil || job.Name != contract.SpanJob {
		t.Fatalf("the fixture's rollouts do not link to its gym.job span: %+v", job)
	}
	header := "collection " + fmtDuration(job.Duration()) + " (" + contract.SpanJob + " span)"

	t.Run("no rollout kept", func(t *testing.T) {
		run := checkLoad(t, fixture, 0)
		if len(run.Traces) != 0 {
			t.Errorf("%d traces held, want none", len(run.Traces))
		}
		if out := render(t, run, goldenOptions); !strings.Contains(out, header) {
			t.Errorf("text report lacks %q:\n%s", header, out)
		}
	})
	t.Run("rollouts without links", func(t *testing.T) {
		dir := copyFixture(t)
		links := regexp.MustCompile(`,"links":\[[^\]]*\]`)
		for _, p := range fix.Processes {
			editFile(t, dir, "telemetry/"+p.File, func(s string) string { return links.ReplaceAllString(s, "") })
		}
		run := checkLoad(t, dir, 3)
		if len(run.Traces) != 3 || run.Trace(job.TraceID) != nil {
			t.Errorf("%d traces held, want the three rollouts' without the gym.job trace", len(run.Traces))
		}
		if out := renderHTML(t, run, HTMLOptions{SlowestK: 3}); !strings.Contains(out, header) {
			t.Errorf("page lacks %q", header)
		}
	})
	t.Run("several gym.job spans", func(t *testing.T) {
		// The header shows the first as a run holding every trace would
		// list it: earliest trace, ties by trace id, then earliest span,
		// ties by span id.
		dir := copyFixture(t)
		start := fix.Start.UnixNano() - int64(time.Second)
		spans := []telfile.Span{
			{TraceID: strings.Repeat("b", 32), SpanID: "0000000000000001", Name: contract.SpanJob, StartNS: start, EndNS: start + 9e6},
			{TraceID: strings.Repeat("a", 32), SpanID: "2222222222222222", Name: contract.SpanJob, StartNS: start, EndNS: start + 5e6},
			{TraceID: strings.Repeat("a", 32), SpanID: "1111111111111111", Name: contract.SpanJob, StartNS: start, EndNS: start + 7e6},
			{TraceID: strings.Repeat("a", 32), SpanID: "0000000000000003", Name: contract.SpanJob, StartNS: start + 1, EndNS: start + 3e6},
		}
		var extra []byte
		for _, s := range spans {
			s.Kind, s.Status = telfile.KindInternal, telfile.StatusUnset
			var err error
			if extra, err = telfile.AppendLine(extra, s); err != nil {
				t.Fatal(err)
			}
		}
		editFile(t, dir, "telemetry/orchestrator.jsonl", func(s string) string { return s + string(extra) })
		run := checkLoad(t, dir, 3)
		want := "collection " + fmtDuration(7*time.Millisecond) + " ("
		if out := render(t, run, goldenOptions); !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	})
}
