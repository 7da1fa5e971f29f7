package report

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// fixture is a run directory made by testdata/gen.go: 12 rollouts of which
// three fail because the resources server panics on their tasks.
const fixture = "testdata/run-small"

func loadFixture(t *testing.T) Run {
	t.Helper()
	run, err := Load(fixture)
	if err != nil {
		t.Fatalf("Load(%s): %v", fixture, err)
	}
	return run
}

func TestLoadFixture(t *testing.T) {
	run := loadFixture(t)
	if run.ID != "run-small" {
		t.Errorf("ID = %q", run.ID)
	}
	if len(run.Notes) != 0 {
		t.Errorf("notes on a clean run: %v", run.Notes)
	}
	types := map[string]string{}
	for _, p := range run.Processes {
		types[p.Name()] = p.ServerType
		if p.Headers != 1 || p.RunID != "run-small" || p.ServiceName != "nemo-gym/"+p.Name() {
			t.Errorf("process %+v", p)
		}
	}
	want := map[string]string{"arithmetic": "resources_servers", "orchestrator": "orchestrator",
		"policy_model": "responses_api_models", "simple_agent": "responses_api_agents"}
	for name, typ := range want {
		if types[name] != typ {
			t.Errorf("process %s has type %q, want %q (all: %v)", name, types[name], typ, types)
		}
	}
	if len(run.Rollouts) != 12 {
		t.Fatalf("%d rollouts, want 12", len(run.Rollouts))
	}
	failed, rewarded := 0, 0
	for i, ro := range run.Rollouts {
		// The resources server panics on the verifications of the last
		// three tasks (see testdata/README.md).
		if ro.Failed() != (ro.TaskIndex >= 9) || ro.Failed() != (ro.File == contract.RunFailuresFile) {
			t.Errorf("rollout %s of %s:%d: failed %v (%s)", ro.RolloutID, ro.File, ro.Line, ro.Failed(), ro.Error)
		}
		if ro.Failed() {
			failed++
			if ro.FailureClass == "" || !strings.Contains(ro.Error, "handler panicked") || ro.Rewarded {
				t.Errorf("failed rollout %+v", ro)
			}
		}
		if ro.Rewarded {
			rewarded++
		}
		if ro.TaskID != strconv.Itoa(ro.TaskIndex) || ro.RolloutIndex != 0 || ro.RolloutID != ro.TaskID+"-0" ||
			len(ro.TraceID) != 32 || ro.DurationMS <= 0 || ro.Rewarded != (ro.Reward > 0 && !ro.Failed()) {
			t.Errorf("rollout %d: %+v", i, ro)
		}
	}
	if failed != 3 || rewarded != 7 {
		t.Errorf("%d failed and %d rewarded rollouts, want 3 and 7", failed, rewarded)
	}
	if run.Start.IsZero() || !run.End.After(run.Start) {
		t.Errorf("run extent %v .. %v", run.Start, run.End)
	}
	if run.Config == nil || len(run.Config.Servers) != 3 || run.Config.MetricExportInterval != 200*time.Millisecond {
		t.Errorf("config %+v", run.Config)
	}
	if got := run.Problems(); len(got) != 0 {
		t.Errorf("problems on a clean run: %+v", got)
	}
	if f := run.Failures(); len(f) != 1 || len(f[0].Rollouts) != 3 || !strings.Contains(f[0].Error, "verify") {
		t.Errorf("failures %+v, want one group of three verify errors", f)
	}

	// Every rollout is one trace spanning all four processes.
	for _, ro := range run.Rollouts {
		tr := run.Trace(ro.TraceID)
		if tr == nil {
			t.Errorf("rollout %s: trace %s not found", ro.RolloutID, ro.TraceID)
			continue
		}
		procs := map[string]bool{}
		for _, s := range tr.Spans {
			procs[s.Process.Name()] = true
		}
		if len(procs) != 4 {
			t.Errorf("trace %s covers %v, want all four processes", tr.ID, procs)
		}
		if len(tr.Orphans()) != 0 {
			t.Errorf("trace %s has orphans", tr.ID)
		}
		rows := tr.Waterfall()
		if len(rows) != len(tr.Spans) || rows[0].Depth != 0 || rows[0].Span.Process.Name() != "orchestrator" {
			t.Errorf("trace %s waterfall starts with %+v", tr.ID, rows[0])
		}
		for i := 1; i < len(rows); i++ {
			if rows[i].Depth > rows[i-1].Depth+1 {
				t.Errorf("trace %s: row %d jumps from depth %d to %d", tr.ID, i, rows[i-1].Depth, rows[i].Depth)
			}
		}
	}
}

func TestFixtureMetrics(t *testing.T) {
	run := loadFixture(t)
	for _, name := range []string{contract.RolloutDuration, contract.VerifyDuration} {
		h, err := run.LastHistogram(name)
		if err != nil || h == nil || h.Count != 12 {
			t.Errorf("%s: %+v, %v; want 12 values", name, h, err)
		}
	}
	tallies := run.VerifyTallies()
	if len(tallies) != 1 || tallies[0].Success != 9 || tallies[0].Failure != 3 || !approx(tallies[0].Rate, 0.75) {
		t.Errorf("verify tallies %+v", tallies)
	}
	var success, failure float64
	windows := run.VerifyWindows(run.ExportInterval())
	if len(windows) < 2 {
		t.Errorf("only %d windows; the fixture should span several exports", len(windows))
	}
	for _, w := range windows {
		success += w.Success
		failure += w.Failure
	}
	if success != 9 || failure != 3 {
		t.Errorf("windows add up to %v ok, %v failed; want 9 and 3", success, failure)
	}
	if c := run.CounterTotals(contract.RolloutCompleted, contract.AttrRolloutOutcome); c[contract.OutcomeSuccess] != 9 || c[contract.OutcomeFailure] != 3 {
		t.Errorf("rollout calls %v", c)
	}
	active := run.ServersActive()
	if len(active) < 2 || active[0].Value != 3 || active[len(active)-1].Value != 0 {
		t.Errorf("servers.active readings %+v", active)
	}
	routes, err := run.HTTPRoutes()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, r := range routes {
		counts[r.Process.Name()+" "+r.Method+" "+r.Route+" "+r.Status] = r.Histogram.Count
	}
	for key, n := range map[string]uint64{
		"arithmetic POST /verify 200": 9, "arithmetic POST /verify 500": 3,
		"policy_model POST /v1/responses 200": 12, "simple_agent POST /run 200": 12,
	} {
		if counts[key] != n {
			t.Errorf("%s: %d requests, want %d (all: %v)", key, counts[key], n, counts)
		}
	}
	slow := run.SlowestRollouts(3)
	if len(slow) != 3 {
		t.Fatalf("%d slowest rollouts", len(slow))
	}
	for i, s := range slow {
		if s.Rollout == nil || s.Trace == nil || s.Span.Name != contract.SpanRollout {
			t.Errorf("slowest #%d: %+v", i+1, s)
		}
		if i > 0 && s.Span.Duration() > slow[i-1].Span.Duration() {
			t.Errorf("slowest rollouts out of order")
		}
	}
}

// copyFixture copies the fixture into a temporary directory for a test to
// damage.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run-small")
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editFile rewrites a file of the run directory through edit.
func editFile(t *testing.T, dir, rel string, edit func(string) string) {
	t.Helper()
	path := filepath.Join(dir, rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceLine swaps line n (1-based) of text for repl.
func replaceLine(t *testing.T, text string, n int, repl string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	if n < 1 || n > len(lines) {
		t.Fatalf("no line %d", n)
	}
	lines[n-1] = repl
	return strings.Join(lines, "\n")
}

func TestTruncatedLastLineIsSkippedWithNote(t *testing.T) {
	dir := copyFixture(t)
	var lines int
	editFile(t, dir, "telemetry/simple_agent.jsonl", func(s string) string {
		s = strings.TrimSuffix(s, "\n")
		lines = strings.Count(s, "\n") + 1
		cut := strings.LastIndexByte(s, '\n') + 40
		return s[:cut] // no newline: a writer died mid-line
	})
	run, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(run.Notes) != 1 {
		t.Fatalf("notes %v, want one", run.Notes)
	}
	n := run.Notes[0]
	if n.File != "telemetry/simple_agent.jsonl" || n.Line != lines || !strings.Contains(n.Message, "cut short") {
		t.Errorf("note %+v, want telemetry/simple_agent.jsonl line %d", n, lines)
	}
	out := render(t, run, goldenOptions)
	for _, want := range []string{n.String(), "Rollout duration", "Slowest rollouts: 3", "Problems"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if p := run.Process("simple_agent"); p == nil || p.Spans != 60 {
		t.Errorf("records before the cut were lost: %+v", p)
	}
	sum, err := Summarize(dir)
	if err != nil || len(sum.Notes) != 1 || !strings.Contains(sum.Notes[0], "simple_agent.jsonl") {
		t.Errorf("Summarize: %v, notes %v", err, sum.Notes)
	}
}

// A corrupt line in the middle of a telemetry file (what a writer that
// kept appending after a short write leaves) costs that line only: Load
// notes it, with file and line, and reads every record after it.
func TestCorruptMiddleLineIsSkippedWithNote(t *testing.T) {
	whole, err := Load(copyFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	p := whole.Process("arithmetic")
	records := p.Spans + p.Metrics + p.Logs
	for _, c := range []struct{ name, line, want string }{
		{"not JSON", `{"type":"span","trace_id":`, "invalid JSON"},
		{"cut and glued to the next record", `{"type":"metric","time_ns":17960{"type":"metric","time_ns":1}`, "invalid JSON"},
		{"unknown type", `{"type":"sandwich"}`, `unknown record type "sandwich"`},
		{"wrong field type", `{"type":"metric","time_ns":"soon"}`, "bad metric record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t)
			editFile(t, dir, "telemetry/arithmetic.jsonl", func(s string) string { return replaceLine(t, s, 5, c.line) })
			run, err := Load(dir)
			if err != nil {
				t.Fatalf("Load refused the run over one corrupt line: %v", err)
			}
			if len(run.Notes) != 1 {
				t.Fatalf("notes %v, want one", run.Notes)
			}
			note := run.Notes[0].String()
			if !strings.HasPrefix(note, "telemetry/arithmetic.jsonl:5: corrupt line") || !strings.Contains(note, c.want) {
				t.Errorf("note %q, want it to name telemetry/arithmetic.jsonl:5 and mention %q", note, c.want)
			}
			got := run.Process("arithmetic")
			if n := got.Spans + got.Metrics + got.Logs; n != records-1 {
				t.Errorf("%d records read, want %d (all but the corrupt line)", n, records-1)
			}
			var out strings.Builder
			if err := WriteText(&out, run, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), note) {
				t.Errorf("report lacks the note %q:\n%s", note, out.String())
			}
		})
	}
}

func TestOtherFormatVersion(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{`"format":1,`, `"format":99,`, "telemetry format 99 is newer"},
		{`"format":1,`, `"format":0,`, "telemetry format 0 is older"},
		{`"format":1,`, ``, "no format version"},
	} {
		dir := copyFixture(t)
		editFile(t, dir, "telemetry/policy_model.jsonl", func(s string) string { return strings.Replace(s, c.from, c.to, 1) })
		_, err := Load(dir)
		var fe *FileError
		if !errors.As(err, &fe) || fe.Line != 1 || !strings.HasSuffix(fe.Path, "policy_model.jsonl") {
			t.Fatalf("%s: err = %v, want a *FileError at policy_model.jsonl:1", c.to, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("message %q lacks %q", err, c.want)
		}
	}
}

func TestMissingOrWrongDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-run")
	_, err := Load(missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing dir: err = %v", err)
	}
	empty := t.TempDir()
	if _, err := Load(empty); !errors.Is(err, ErrNotRunDir) || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty dir: err = %v", err)
	}
	file := filepath.Join(copyFixture(t), "config.yaml")
	if _, err := Load(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as dir: err = %v", err)
	}
	if _, err := Summarize(missing); err == nil {
		t.Error("Summarize of a missing dir succeeded")
	}
}

func TestBrokenRolloutLine(t *testing.T) {
	dir := copyFixture(t)
	editFile(t, dir, contract.RunRolloutsFile, func(s string) string { return replaceLine(t, s, 4, `{"_ng_task_index": 3`) })
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Rollouts) != 11 {
		t.Errorf("%d rollouts, want the 11 readable ones", len(run.Rollouts))
	}
	if len(run.Notes) != 1 || run.Notes[0].File != contract.RunRolloutsFile || run.Notes[0].Line != 4 {
		t.Fatalf("notes %v, want one for rollouts.jsonl:4", run.Notes)
	}
	if out := render(t, run, goldenOptions); !strings.Contains(out, "rollouts.jsonl:4: unreadable rollout line skipped") {
		t.Errorf("report lacks the note:\n%s", out)
	}

	// A cut-short last line reads as such.
	dir = copyFixture(t)
	editFile(t, dir, contract.RunRolloutsFile, func(s string) string { return strings.TrimSuffix(s, "\n")[:len(s)-30] })
	run, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Notes) != 1 || run.Notes[0].Line != 9 || !strings.Contains(run.Notes[0].Message, "cut short") {
		t.Errorf("notes %v, want rollouts.jsonl:9 cut short", run.Notes)
	}

	// So does one of the failures file.
	dir = copyFixture(t)
	editFile(t, dir, contract.RunFailuresFile, func(s string) string { return strings.TrimSuffix(s, "\n")[:len(s)-30] })
	run, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Notes) != 1 || run.Notes[0].File != contract.RunFailuresFile || run.Notes[0].Line != 3 || len(run.Rollouts) != 11 {
		t.Errorf("notes %v, want %s:3 cut short", run.Notes, contract.RunFailuresFile)
	}
}

func TestTelemetryOff(t *testing.T) {
	// What gymlens run --no-telemetry leaves: an empty telemetry directory.
	dir := copyFixture(t)
	if err := os.RemoveAll(filepath.Join(dir, contract.RunTelemetryDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, contract.RunTelemetryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	editFile(t, dir, contract.RunConfigFile, func(s string) string { return strings.Replace(s, `enabled: "1"`, `enabled: "0"`, 1) })
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := run.Problems(); len(p) != 0 {
		t.Errorf("telemetry off is not a problem: %+v", p)
	}
	out := render(t, run, goldenOptions)
	for _, want := range []string{"telemetry  none exported", "12 (9 in rollouts.jsonl, 3 in rollouts_failures.jsonl): 3 failed", "not exported", "none found"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func problemsOf(run Run, kind ProblemKind) []Problem {
	var out []Problem
	for _, p := range run.Problems() {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

func TestProblemBrokenTrace(t *testing.T) {
	dir := copyFixture(t)
	// Without the orchestrator's file, every agent /run server span points
	// at a client span nobody exported.
	if err := os.Remove(filepath.Join(dir, "telemetry", "orchestrator.jsonl")); err != nil {
		t.Fatal(err)
	}
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Twelve in all: the first ten listed (what a report shows), the
	// other two counted.
	broken := problemsOf(run, ProblemBrokenTrace)
	if len(broken) != maxProblemsPerKind || run.Unlisted(ProblemBrokenTrace) != 12-maxProblemsPerKind {
		t.Fatalf("%d broken-trace problems listed and %d unlisted, want %d and %d: %+v",
			len(broken), run.Unlisted(ProblemBrokenTrace), maxProblemsPerKind, 12-maxProblemsPerKind, broken)
	}
	for _, p := range broken {
		s := run.Trace(p.TraceID).Span(p.SpanID)
		if s == nil || s.Name != "POST /run" || s.Kind != "server" || p.File != "telemetry/simple_agent.jsonl" || p.Line != s.Line {
			t.Errorf("problem %+v", p)
		}
	}
	rows := run.Trace(broken[0].TraceID).Waterfall()
	if !rows[0].Orphan || rows[0].Span.SpanID != broken[0].SpanID {
		t.Errorf("waterfall should start at the orphan: %+v", rows[0])
	}
	out := render(t, run, goldenOptions)
	if !strings.Contains(out, "Problems: 12") || !strings.Contains(out, "broken trace: ... and 2 more") ||
		!strings.Contains(out, "(parent missing)") {
		t.Errorf("report:\n%s", out)
	}
}

func TestProblemSilentAndMissingProcesses(t *testing.T) {
	dir := copyFixture(t)
	// arithmetic keeps its header only; policy_model wrote no file.
	editFile(t, dir, "telemetry/arithmetic.jsonl", func(s string) string { return s[:strings.IndexByte(s, '\n')+1] })
	if err := os.Remove(filepath.Join(dir, "telemetry", "policy_model.jsonl")); err != nil {
		t.Fatal(err)
	}
	// And an empty file from a process that never got to write a header.
	if err := os.WriteFile(filepath.Join(dir, "telemetry", "extra.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	silent := problemsOf(run, ProblemSilentProcess)
	if len(silent) != 2 || silent[0].File != "telemetry/arithmetic.jsonl" || !strings.Contains(silent[0].Message, "only a resource header") ||
		silent[1].File != "telemetry/extra.jsonl" || !strings.Contains(silent[1].Message, "empty file") {
		t.Errorf("silent processes %+v", silent)
	}
	missing := problemsOf(run, ProblemMissingTelemetry)
	if len(missing) != 1 || !strings.Contains(missing[0].Message, "policy_model") {
		t.Errorf("missing telemetry %+v", missing)
	}
	if n := len(run.Problems()); n != 3 {
		t.Errorf("%d problems, want 3: %+v", n, run.Problems())
	}

	// Exported over OTLP, no server is expected to have a file.
	editFile(t, dir, contract.RunConfigFile, func(s string) string { return strings.Replace(s, "exporter: file", "exporter: otlp", 1) })
	run, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := problemsOf(run, ProblemMissingTelemetry); len(m) != 0 {
		t.Errorf("OTLP export: missing telemetry reported: %+v", m)
	}
}

func TestProblemServersActiveWriterAndRunID(t *testing.T) {
	dir := copyFixture(t)
	orch, err := os.ReadFile(filepath.Join(dir, "telemetry", "orchestrator.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var gauge string
	for _, line := range strings.Split(string(orch), "\n") {
		if strings.Contains(line, `"name":"gym.servers.active"`) {
			gauge = line
			break
		}
	}
	if gauge == "" {
		t.Fatal("no gym.servers.active record in the fixture")
	}
	editFile(t, dir, "telemetry/simple_agent.jsonl", func(s string) string { return s + gauge + "\n" })
	editFile(t, dir, "telemetry/policy_model.jsonl", func(s string) string {
		return strings.Replace(s, `"nemo.run.id":"run-small"`, `"nemo.run.id":"elsewhere"`, 1)
	})
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := problemsOf(run, ProblemServersActiveWriter)
	if len(w) != 1 || w[0].File != "telemetry/simple_agent.jsonl" {
		t.Errorf("servers.active writers %+v", w)
	}
	m := problemsOf(run, ProblemRunIDMismatch)
	if len(m) != 1 || !strings.Contains(m[0].Message, "elsewhere") {
		t.Errorf("run id mismatch %+v", m)
	}
}

func TestWaterfallSurvivesCycles(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	p := &Process{File: "x.jsonl"}
	spans := []*Span{
		{Process: p, SpanID: "a", Name: "root", Start: at(0), End: at(10)},
		{Process: p, SpanID: "b", ParentSpanID: "a", Name: "child", Start: at(1), End: at(5)},
		{Process: p, SpanID: "c", ParentSpanID: "d", Name: "loop1", Start: at(2), End: at(3)},
		{Process: p, SpanID: "d", ParentSpanID: "c", Name: "loop2", Start: at(3), End: at(4)},
		{Process: p, SpanID: "e", ParentSpanID: "e", Name: "self", Start: at(4), End: at(5)},
	}
	tr := &Trace{ID: "t", Spans: spans, Start: at(0), End: at(10), byID: map[string]*Span{}}
	for _, s := range spans {
		tr.byID[s.SpanID] = s
	}
	rows := tr.Waterfall()
	if len(rows) != len(spans) {
		t.Fatalf("%d rows for %d spans", len(rows), len(spans))
	}
	if rows[0].Span.Name != "root" || rows[1].Span.Name != "child" || rows[1].Depth != 1 || rows[1].Offset != time.Millisecond {
		t.Errorf("rows %+v", rows[:2])
	}
	if len(tr.Orphans()) != 0 {
		t.Errorf("spans in a cycle have their parents: %+v", tr.Orphans())
	}
}

func TestDeltaStreamsAreAccumulated(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, contract.RunTelemetryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	lines := `{"type":"resource","format":1,"time_ns":1,"attributes":{"nemo.gym.server.name":"r","nemo.gym.server.type":"resources_servers"}}
{"type":"metric","time_ns":1000,"scope":"s","name":"gym.verify.calls","unit":"{call}","kind":"sum","temporality":"delta","monotonic":true,"points":[{"attributes":{"nemo.gym.verify.outcome":"success"},"start_ns":0,"time_ns":1000,"value":2}]}
{"type":"metric","time_ns":2000,"scope":"s","name":"gym.verify.calls","unit":"{call}","kind":"sum","temporality":"delta","monotonic":true,"points":[{"attributes":{"nemo.gym.verify.outcome":"success"},"start_ns":1000,"time_ns":2000,"value":3}]}
`
	if err := os.WriteFile(filepath.Join(dir, contract.RunTelemetryDir, "r.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tl := run.VerifyTallies()
	if len(tl) != 1 || tl[0].Success != 5 || !math.IsNaN(tl[0].Rate) {
		t.Errorf("tallies %+v, want 5 successes", tl)
	}
	if len(run.Notes) != 1 || run.Notes[0].File != contract.RunRolloutsFile {
		t.Errorf("notes %v, want one about the missing rollouts.jsonl", run.Notes)
	}
}

func TestVerifyWindowsAssignIncreases(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, contract.RunTelemetryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	const ms = int64(time.Millisecond)
	point := func(atMS int64, outcome string, v int) string {
		return `{"type":"metric","time_ns":` + itoa(atMS*ms) + `,"scope":"s","name":"gym.verify.calls","unit":"{call}","kind":"sum","temporality":"cumulative","monotonic":true,"points":[{"attributes":{"nemo.gym.verify.outcome":"` + outcome + `"},"start_ns":0,"time_ns":` + itoa(atMS*ms) + `,"value":` + itoa(int64(v)) + `}]}` + "\n"
	}
	lines := `{"type":"resource","format":1,"time_ns":0,"attributes":{"nemo.gym.server.name":"r"}}` + "\n" +
		point(1000, "success", 0) + // the run's start
		point(1100, "success", 2) + // window 0: +2
		point(1300, "success", 5) + // window 1: +3
		point(1350, "success", 1) + // reset: window 1: +1
		point(1350, "failure", 4) + // window 1: +4 failed
		point(1700, "failure", 4) // window 3: nothing new
	if err := os.WriteFile(filepath.Join(dir, contract.RunTelemetryDir, "r.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := run.VerifyWindows(200 * time.Millisecond)
	want := []Window{
		{From: 0, To: 200 * time.Millisecond, Success: 2},
		{From: 200 * time.Millisecond, To: 400 * time.Millisecond, Success: 4, Failure: 4},
		{From: 400 * time.Millisecond, To: 600 * time.Millisecond},
		{From: 600 * time.Millisecond, To: 800 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("windows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("window %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if !math.IsNaN(got[2].Fraction()) || got[1].Fraction() != 0.5 {
		t.Errorf("fractions %v %v", got[1].Fraction(), got[2].Fraction())
	}
	// No config.yaml: the interval is the (upper) median of the gaps
	// between exports of one stream: 100, 200, 50 and 350 ms.
	if iv := run.ExportInterval(); iv != 200*time.Millisecond {
		t.Errorf("inferred export interval %v, want 200ms", iv)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestLinksResolve: every rollout's root span links to the collection's
// gym.job span, which is in a trace of its own, and the reports say so.
func TestLinksResolve(t *testing.T) {
	run := loadFixture(t)
	linked := 0
	for _, tr := range run.Traces {
		for _, s := range tr.Spans {
			for _, l := range s.Links {
				linked++
				target := run.LinkTarget(l)
				if target == nil || target.Name != contract.SpanJob || target.TraceID == s.TraceID {
					t.Errorf("%s in trace %s links to %+v, resolved to %+v; want gym.job in another trace", s.Name, s.TraceID, l, target)
				}
			}
		}
	}
	if linked != 12 {
		t.Errorf("%d links, want one per rollout (12)", linked)
	}
	if got := run.LinkTarget(Link{TraceID: "00000000000000000000000000000001", SpanID: "0000000000000001"}); got != nil {
		t.Errorf("a link to nothing resolved to %+v", got)
	}
	if d := run.describeLink(Link{TraceID: "ab", SpanID: "cd"}); !strings.Contains(d, "not exported") {
		t.Errorf("unresolved link described as %q", d)
	}
	page := renderHTML(t, run, HTMLOptions{SlowestK: 3})
	if !strings.Contains(page, "↗ link") || !strings.Contains(page, "<td>links to</td><td>gym.job (orchestrator), trace ") {
		t.Error("the page does not show the rollouts' links to gym.job")
	}
}

// The rollout lines of a resumed run: completed lines, a failure line a
// later run completed, a rollout that failed twice, and lines missing the
// collector's members.
func TestRolloutLines(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(contract.RunRolloutsFile,
		`{"_ng_task_index":0,"_ng_rollout_index":0,"reward":1,"expected_answer":"4","_gymlens":{"trace_id":"0af7651916cd43dd8448eb211c80319c","rollout_id":"0-0","duration_ms":12.5,"attempted_at":"2026-01-02T03:04:05Z","attempts":1}}`,
		`{"_ng_task_index":0,"_ng_rollout_index":1,"reward":0}`,
		`{"_ng_task_index":1,"_ng_rollout_index":0,"reward":0.5,"_ng_failure_class":"judge_failed","_ng_failure_judge_error":"judge down"}`,
		`{"reward":1}`,
	)
	write(contract.RunFailuresFile,
		`{"_ng_task_index":0,"_ng_rollout_index":1,"_ng_failure_class":"rollout_error","_ng_failure_error":"since completed"}`,
		`{"_ng_task_index":2,"_ng_rollout_index":0,"_ng_failure_class":"rollout_error","_ng_failure_error":"first try"}`,
		`{"_ng_task_index":2,"_ng_rollout_index":0,"_ng_attempt_index":3,"_ng_failure_class":"rollout_error","_ng_failure_error":"second try","_gymlens":{"trace_id":"","rollout_id":"2-0-a3","duration_ms":3,"attempted_at":"2026-01-02T03:04:05Z","attempts":3}}`,
		`{"_ng_failure_class":"kill_shaped"}`,
		`{"_ng_task_index":3,"_ng_rollout_index":0,"_ng_failure_class":null,"reward":1}`,
	)
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rollout{
		{File: contract.RunRolloutsFile, Line: 1, TaskIndex: 0, RolloutIndex: 0, TaskID: "0", RolloutID: "0-0", TraceID: "0af7651916cd43dd8448eb211c80319c", Reward: 1, Rewarded: true, DurationMS: 12.5},
		{File: contract.RunRolloutsFile, Line: 2, TaskIndex: 0, RolloutIndex: 1, TaskID: "0", RolloutID: "0-1"},
		{File: contract.RunRolloutsFile, Line: 3, TaskIndex: 1, RolloutIndex: 0, TaskID: "1", RolloutID: "1-0", Reward: 0.5, FailureClass: "judge_failed", Error: "judge down"},
		{File: contract.RunRolloutsFile, Line: 4, TaskIndex: -1, RolloutIndex: -1, Reward: 1, Rewarded: true},
		{File: contract.RunFailuresFile, Line: 3, TaskIndex: 2, RolloutIndex: 0, TaskID: "2", RolloutID: "2-0-a3", FailureClass: "rollout_error", Error: "second try", DurationMS: 3},
		{File: contract.RunFailuresFile, Line: 4, TaskIndex: -1, RolloutIndex: -1, FailureClass: "kill_shaped", Error: "failure class kill_shaped"},
		{File: contract.RunFailuresFile, Line: 5, TaskIndex: 3, RolloutIndex: 0, TaskID: "3", RolloutID: "3-0", Reward: 1, Error: "failure class not given"},
	}
	if len(run.Rollouts) != len(want) {
		t.Fatalf("%d rollouts, want %d: %+v", len(run.Rollouts), len(want), run.Rollouts)
	}
	for i := range want {
		if run.Rollouts[i] != want[i] {
			t.Errorf("rollout %d:\n got %+v\nwant %+v", i, run.Rollouts[i], want[i])
		}
	}
	sum := run.Summary()
	if sum.Rollouts != 7 || sum.Failed != 4 || sum.Rewarded != 2 || sum.SuccessFraction() != 2.0/7 {
		t.Errorf("summary %+v", sum)
	}
	var groups []string
	for _, g := range run.Failures() {
		var ids []string
		for _, ro := range g.Rollouts {
			ids = append(ids, ro.label())
		}
		groups = append(groups, g.Error+": "+strings.Join(ids, " "))
	}
	if got := strings.Join(groups, "; "); got != "failure class kill_shaped: -; failure class not given: 3-0; judge down: 1-0; second try: 2-0-a3" {
		t.Errorf("failure groups %q", got)
	}
	out := render(t, run, goldenOptions)
	if !strings.Contains(out, "7 (4 in rollouts.jsonl, 3 in rollouts_failures.jsonl): 4 failed, 2 rewarded") {
		t.Errorf("report:\n%s", out)
	}
}

// TestWritersSharingAnInstanceID: two processes appended to one file with
// the same service.instance.id (nemo-lens names every rank-0 process of a
// run <run>-rank0) keep their own cumulative streams, told apart by
// process.pid; taken as one stream, the later total would hide the other.
func TestWritersSharingAnInstanceID(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, contract.RunTelemetryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	header := func(pid int) string {
		return fmt.Sprintf(`{"type":"resource","format":1,"time_ns":1,"attributes":{"nemo.gym.server.name":"r","nemo.gym.server.type":"resources_servers","service.instance.id":"run-rank0","process.pid":%d}}`, pid)
	}
	point := func(v int) string {
		return fmt.Sprintf(`{"type":"metric","time_ns":2000,"scope":"nemo.lens","name":"gym.verify.calls","unit":"{call}","kind":"sum","temporality":"cumulative","monotonic":true,"points":[{"attributes":{"nemo.gym.verify.outcome":"success"},"start_ns":0,"time_ns":2000,"value":%d}]}`, v)
	}
	lines := strings.Join([]string{header(101), point(2), header(102), point(3)}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, contract.RunTelemetryDir, "r.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tl := run.VerifyTallies()
	if len(tl) != 1 || tl[0].Success != 5 {
		t.Errorf("tallies %+v, want the two writers' 2 and 3 successes summed to 5", tl)
	}
}
