package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sameReport checks that a run loaded with the default (two-pass) reading
// reports exactly what the same run loaded with every span kept reports:
// text and HTML, the summary and the analysis methods.
func sameReport(t *testing.T, dir string, keep int) {
	t.Helper()
	full, err := LoadWith(dir, LoadOptions{AllSpans: true})
	if err != nil {
		t.Fatalf("LoadWith(AllSpans): %v", err)
	}
	part, err := LoadWith(dir, LoadOptions{KeepSlowest: keep})
	if err != nil {
		t.Fatalf("LoadWith(KeepSlowest %d): %v", keep, err)
	}
	if part.index == nil || full.index != nil {
		t.Fatal("the two loads did not take the two paths")
	}
	for _, width := range []int{MinWidth, DefaultWidth} {
		opts := TextOptions{SlowestK: keep, Width: width}
		if a, b := render(t, full, opts), render(t, part, opts); a != b {
			t.Errorf("text report (width %d) differs:\n%s", width, firstDiff(a, b))
		}
	}
	if a, b := renderHTML(t, full, HTMLOptions{SlowestK: keep}), renderHTML(t, part, HTMLOptions{SlowestK: keep}); a != b {
		t.Errorf("HTML report differs:\n%s", firstDiff(a, b))
	}
	if a, b := fmt.Sprintf("%+v", full.Summary()), fmt.Sprintf("%+v", part.Summary()); a != b {
		t.Errorf("summary differs:\n%s", firstDiff(a, b))
	}
	// The partial load lists the first broken traces and counts the rest.
	var listed []Problem
	unlisted := 0
	for _, p := range full.Problems() {
		if p.Kind == ProblemBrokenTrace && countKind(listed, ProblemBrokenTrace) >= maxProblemsPerKind {
			unlisted++
			continue
		}
		listed = append(listed, p)
	}
	if a, b := fmt.Sprintf("%+v", listed), fmt.Sprintf("%+v", part.Problems()); a != b {
		t.Errorf("problems differ:\n%s", firstDiff(a, b))
	}
	if got := part.Unlisted(ProblemBrokenTrace); got != unlisted {
		t.Errorf("Unlisted(broken trace) = %d, want %d", got, unlisted)
	}
	if !full.Start.Equal(part.Start) || !full.End.Equal(part.End) {
		t.Errorf("extent %v..%v, want %v..%v", part.Start, part.End, full.Start, full.End)
	}
	names := map[string]bool{}
	for _, tr := range full.Traces {
		for _, s := range tr.Spans {
			names[s.Name] = true
		}
	}
	for name := range names {
		for _, agents := range []bool{false, true} {
			if a, b := full.SpanDurations(name, agents), part.SpanDurations(name, agents); !slices.Equal(a, b) {
				t.Errorf("SpanDurations(%q, %v): %d durations, want %d", name, agents, len(b), len(a))
			}
		}
	}
	fs, ps := full.SlowestRollouts(keep), part.SlowestRollouts(keep+5)
	if len(fs) != len(ps) {
		t.Fatalf("SlowestRollouts: %d, want %d", len(ps), len(fs))
	}
	for i := range fs {
		a, b := fs[i], ps[i]
		if a.Span.TraceID != b.Span.TraceID || a.Span.SpanID != b.Span.SpanID || a.Span.Line != b.Span.Line ||
			len(a.Trace.Spans) != len(b.Trace.Spans) || (a.Rollout == nil) != (b.Rollout == nil) {
			t.Errorf("slowest #%d: trace %s span %s, want trace %s span %s", i+1, b.Span.TraceID, b.Span.SpanID, a.Span.TraceID, a.Span.SpanID)
		}
	}
}

func countKind(probs []Problem, kind ProblemKind) int {
	n := 0
	for _, p := range probs {
		if p.Kind == kind {
			n++
		}
	}
	return n
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

func TestPartialLoadReportsAsFullLoad(t *testing.T) {
	t.Run("fixture", func(t *testing.T) {
		for _, keep := range []int{0, 1, 3, 12, 100} {
			sameReport(t, fixture, keep)
		}
	})
	t.Run("broken traces", func(t *testing.T) {
		dir := copyFixture(t)
		if err := os.Remove(filepath.Join(dir, TelemetryDir, "orchestrator.jsonl")); err != nil {
			t.Fatal(err)
		}
		sameReport(t, dir, 3)
		sameReport(t, dir, 0)
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
		sameReport(t, dir, 3)
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
		editFile(t, dir, RolloutsFile, func(s string) string { return strings.ReplaceAll(s, first.ID, "trace one") })
		sameReport(t, dir, 3)
		sameReport(t, dir, 1) // the inexact traces are not among the kept ones
		part, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if broken := problemsOf(part, ProblemBrokenTrace); len(broken) != 1 || !strings.Contains(broken[0].Message, "not hex") {
			t.Errorf("broken traces %+v, want the one whose parent is not hex", broken)
		}
		if tr := part.Trace("trace one"); tr == nil || part.Trace(second.ID).Span(strings.ToUpper(upper.SpanID)) == nil {
			t.Error("the edited traces were not kept")
		}
	})
	t.Run("synthetic, durations tie", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		writeSyntheticRun(t, dir, 240, 3, false)
		sameReport(t, dir, 5)
		sameReport(t, dir, 30)
	})
	t.Run("synthetic", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		writeSyntheticRun(t, dir, 300, 5, true)
		sameReport(t, dir, DefaultSlowestK)
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
	if n := len(run.SpanDurations(SpanRollout, true)); n != rollouts {
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
				if target := run.LinkTarget(l); target == nil || target.Name != SpanJob {
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
