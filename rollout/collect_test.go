package rollout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gymlens/gymlens/dataset"
	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/server"
)

// hangGuard bounds how long a test waits for something that should happen
// at once; reaching it means a hang, never a slow machine.
const hangGuard = 30 * time.Second

// readRecords parses the output file, failing the test on any line that is
// not a complete, valid record.
func readRecords(t *testing.T, path string) []rollout.Record {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", raw[max(0, len(raw)-80):])
	}
	var recs []rollout.Record
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r rollout.Record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %d %q: %v", len(recs)+1, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// byTask indexes records by task id, failing on a task recorded twice.
func byTask(t *testing.T, recs []rollout.Record) map[string]rollout.Record {
	t.Helper()
	m := make(map[string]rollout.Record, len(recs))
	for _, r := range recs {
		if _, dup := m[r.TaskID]; dup {
			t.Fatalf("task %s recorded twice", r.TaskID)
		}
		m[r.TaskID] = r
	}
	return m
}

func ids(tasks []protocol.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func outPath(t *testing.T) string { return filepath.Join(t.TempDir(), "rollouts.jsonl") }

func TestCollectAll(t *testing.T) {
	agent := startAgent(t, nil)
	tasks := dataset.Arithmetic(50, 1)
	out := outPath(t)
	sum, err := rollout.Collect(context.Background(), tasks, out, rollout.Options{AgentURL: agent.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != 50 || sum.Succeeded != 50 || sum.Failed != 0 || sum.Skipped != 0 || sum.Correct != 50 || sum.Remaining() != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if len(sum.DurationsMS) != 50 || sum.Elapsed <= 0 || sum.RepairedBytes != 0 {
		t.Fatalf("summary %+v", sum)
	}
	recs := byTask(t, readRecords(t, out))
	if len(recs) != 50 {
		t.Fatalf("%d records for 50 tasks", len(recs))
	}
	for _, task := range tasks {
		r, ok := recs[task.ID]
		if !ok {
			t.Fatalf("task %s has no record", task.ID)
		}
		if r.Failed() || !r.Correct || r.Reward != 1 || r.Answer != task.Expected || r.RolloutID != "ro-"+task.ID ||
			r.AgentDurationMS != 1.5 || r.DurationMS <= 0 || r.Attempted.IsZero() || r.Attempted.Location() != time.UTC {
			t.Fatalf("record %+v", r)
		}
	}
	seen := agent.Seen()
	slices.Sort(seen)
	if want := ids(tasks); !slices.Equal(seen, want) {
		t.Fatalf("agent saw %v", seen)
	}

	// A second run over the same output has nothing left to do.
	sum, err = rollout.Collect(context.Background(), tasks, out, rollout.Options{AgentURL: agent.URL})
	if err != nil || sum.Skipped != 50 || sum.Succeeded+sum.Failed != 0 {
		t.Fatalf("rerun: %+v, %v", sum, err)
	}
	if n := len(agent.Seen()); n != 50 {
		t.Fatalf("rerun sent %d more rollouts", n-50)
	}
}

func TestCollectFile(t *testing.T) {
	agent := startAgent(t, nil)
	dir := t.TempDir()
	in := filepath.Join(dir, "tasks.jsonl")
	var buf bytes.Buffer
	if err := dataset.WriteJSONL(&buf, dataset.Arithmetic(7, 3)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	sum, err := rollout.CollectFile(context.Background(), in, out, rollout.Options{AgentURL: agent.URL})
	if err != nil || sum.Succeeded != 7 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if n := len(readRecords(t, out)); n != 7 {
		t.Fatalf("%d records", n)
	}

	if err := os.WriteFile(in, []byte(`{"id":"a","question":"q"}`+"\n"+`{"id":"a","question":"q"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.CollectFile(context.Background(), in, out, rollout.Options{AgentURL: agent.URL}); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad input file: %v", err)
	}
	if _, err := rollout.CollectFile(context.Background(), filepath.Join(dir, "missing.jsonl"), out, rollout.Options{AgentURL: agent.URL}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing input file: %v", err)
	}
}

func TestCollectRejectsBadInput(t *testing.T) {
	out := outPath(t)
	tasks := dataset.Arithmetic(2, 1)
	for name, tc := range map[string]struct {
		url   string
		tasks []protocol.Task
	}{
		"empty url":     {"", tasks},
		"no scheme":     {"127.0.0.1:80", tasks},
		"query":         {"http://127.0.0.1:80/?x=1", tasks},
		"invalid task":  {"http://127.0.0.1:80", []protocol.Task{{ID: "a"}}},
		"duplicate ids": {"http://127.0.0.1:80", []protocol.Task{{ID: "a", Question: "q"}, {ID: "a", Question: "r"}}},
	} {
		if _, err := rollout.Collect(context.Background(), tc.tasks, out, rollout.Options{AgentURL: tc.url}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("output touched before the input was checked: %v", err)
	}
}

func TestCollectConcurrencyBound(t *testing.T) {
	const limit = 4
	reached := make(chan struct{})
	var once sync.Once
	var agent *fakeAgent
	agent = startAgent(t, func(ctx context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
		// Hold every request until the bound has been reached once, so the
		// peak is exactly the bound and not an accident of timing.
		if agent.inFlight.Load() >= limit {
			once.Do(func() { close(reached) })
		}
		select {
		case <-reached:
		case <-ctx.Done():
		case <-time.After(hangGuard):
		}
		return answerCorrectly(ctx, req)
	})
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(60, 2), outPath(t), rollout.Options{AgentURL: agent.URL, Concurrency: limit})
	if err != nil || sum.Succeeded != 60 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if peak := agent.maxInFlight.Load(); peak != limit {
		t.Fatalf("peak in flight %d, want exactly %d", peak, limit)
	}
}

func TestCollectResumes(t *testing.T) {
	agent := startAgent(t, nil)
	tasks := dataset.Arithmetic(10, 4)
	out := outPath(t)
	var pre bytes.Buffer
	for _, task := range tasks[:5] {
		line, _ := json.Marshal(rollout.Record{TaskID: task.ID, Reward: 1, Correct: true, Attempted: time.Now().UTC()})
		pre.Write(append(line, '\n'))
	}
	pre.WriteString("\n") // a blank line is harmless
	if err := os.WriteFile(out, pre.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := rollout.Collect(context.Background(), tasks, out, rollout.Options{AgentURL: agent.URL, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 5 || sum.Succeeded != 5 || sum.Remaining() != 0 || sum.RepairedBytes != 0 {
		t.Fatalf("summary %+v", sum)
	}
	seen := agent.Seen()
	slices.Sort(seen)
	if want := ids(tasks[5:]); !slices.Equal(seen, want) {
		t.Fatalf("agent saw %v, want only %v", seen, want)
	}
	raw, _ := os.ReadFile(out)
	if !bytes.HasPrefix(raw, pre.Bytes()) {
		t.Fatal("existing lines were changed")
	}
	if got := byTask(t, readRecords(t, out)); len(got) != 10 {
		t.Fatalf("%d tasks recorded", len(got))
	}
}

func TestCollectRepairsTruncatedLastLine(t *testing.T) {
	agent := startAgent(t, nil)
	tasks := dataset.Arithmetic(6, 5)
	out := outPath(t)
	var pre bytes.Buffer
	for _, task := range tasks[:3] {
		line, _ := json.Marshal(rollout.Record{TaskID: task.ID, Attempted: time.Now().UTC()})
		pre.Write(append(line, '\n'))
	}
	full, _ := json.Marshal(rollout.Record{TaskID: tasks[3].ID, Attempted: time.Now().UTC()})
	partial := full[:len(full)/2] // the process died in the middle of this write
	if err := os.WriteFile(out, append(bytes.Clone(pre.Bytes()), partial...), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := rollout.Collect(context.Background(), tasks, out, rollout.Options{AgentURL: agent.URL})
	if err != nil {
		t.Fatal(err)
	}
	if sum.RepairedBytes != int64(len(partial)) || sum.Skipped != 3 || sum.Succeeded != 3 {
		t.Fatalf("summary %+v, want %d bytes repaired", sum, len(partial))
	}
	seen := agent.Seen()
	slices.Sort(seen)
	if want := ids(tasks[3:]); !slices.Equal(seen, want) {
		t.Fatalf("agent saw %v, want %v (the truncated task runs again)", seen, want)
	}
	raw, _ := os.ReadFile(out)
	if !bytes.HasPrefix(raw, pre.Bytes()) || bytes.Contains(raw, partial) && !bytes.Contains(raw, full) {
		t.Fatalf("repair changed complete lines or kept the fragment:\n%s", raw)
	}
	if got := byTask(t, readRecords(t, out)); len(got) != 6 || got[tasks[3].ID].Answer != tasks[3].Expected {
		t.Fatalf("records %v", got)
	}
}

func TestCollectRefusesCorruptOutput(t *testing.T) {
	out := outPath(t)
	corrupt := `{"task_id":"a"}` + "\n" + "not json\n" + `{"task_id":"b"}` + "\n"
	if err := os.WriteFile(out, []byte(corrupt), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 1), out, rollout.Options{AgentURL: "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want one naming line 2", err)
	}
	if raw, _ := os.ReadFile(out); string(raw) != corrupt {
		t.Fatal("a corrupt output was modified")
	}
	if err := os.WriteFile(out, []byte(`{"reward":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 1), out, rollout.Options{AgentURL: "http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "task_id") {
		t.Fatalf("line without task_id: %v", err)
	}
}

func TestCollectRecordsFailures(t *testing.T) {
	tasks := dataset.Arithmetic(12, 6)
	status500 := tasks[1].ID
	inBand := tasks[4].ID
	slow := tasks[7].ID
	wrongTask := tasks[9].ID
	agent := startAgent(t, func(ctx context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
		switch req.Task.ID {
		case status500:
			return protocol.RunResponse{}, errBoom
		case inBand:
			return protocol.RunResponse{RolloutID: "ro-x", TaskID: inBand, Error: "model call failed: 503"}, nil
		case slow:
			<-ctx.Done() // until the client gives up and hangs up
			return protocol.RunResponse{}, ctx.Err()
		case wrongTask:
			return protocol.RunResponse{TaskID: "someone-else"}, nil
		}
		return answerCorrectly(ctx, req)
	})
	client := server.NewClient(server.ClientOptions{Timeout: 300 * time.Millisecond, Retries: -1})
	t.Cleanup(client.CloseIdleConnections)
	out := outPath(t)
	sum, err := rollout.Collect(context.Background(), tasks, out, rollout.Options{AgentURL: agent.URL, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 4 || sum.Succeeded != 8 || sum.Correct != 8 || len(sum.DurationsMS) != 12 {
		t.Fatalf("summary %+v", sum)
	}
	recs := byTask(t, readRecords(t, out))
	for id, want := range map[string]string{
		status500: "500",
		inBand:    "model call failed: 503",
		slow:      "deadline exceeded",
		wrongTask: `"someone-else"`,
	} {
		r := recs[id]
		if !r.Failed() || !strings.Contains(r.Error, want) || r.Correct || r.Reward != 0 {
			t.Errorf("%s: record %+v, want an error containing %q", id, r, want)
		}
	}
	if !strings.Contains(recs[status500].Error, errBoom.Error()) {
		t.Errorf("the agent's error message is lost: %q", recs[status500].Error)
	}
	if recs[inBand].RolloutID != "ro-x" {
		t.Errorf("in-band failure lost its rollout id: %+v", recs[inBand])
	}
}

func TestCollectAgentGoesAway(t *testing.T) {
	tasks := dataset.Arithmetic(10, 7)
	var agent *fakeAgent
	var calls atomic.Int64
	agent = startAgent(t, func(ctx context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
		if calls.Add(1) == 4 { // Concurrency 1: requests come one at a time
			agent.beginStop() // answer this one, refuse every later connection
		}
		return answerCorrectly(ctx, req)
	})
	client := server.NewClient(server.ClientOptions{Retries: -1})
	t.Cleanup(client.CloseIdleConnections)
	out := outPath(t)
	sum, err := rollout.Collect(context.Background(), tasks, out, rollout.Options{AgentURL: agent.URL, Client: client, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Succeeded != 4 || sum.Failed != 6 || sum.Remaining() != 0 {
		t.Fatalf("summary %+v", sum)
	}
	recs := readRecords(t, out)
	if len(recs) != 10 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs[4:] {
		if !strings.Contains(r.Error, "refused") {
			t.Fatalf("record %+v, want a refused connection", r)
		}
	}
}

func TestCollectCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const quick = 10
	var mu sync.Mutex
	var calls int
	agent := startAgent(t, func(rctx context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= quick {
			return answerCorrectly(rctx, req)
		}
		cancel()      // the operator hits Ctrl-C while this rollout runs
		<-rctx.Done() // and the collector hangs up
		return protocol.RunResponse{}, rctx.Err()
	})
	out := outPath(t)
	done := collectAsync(ctx, dataset.Arithmetic(200, 8), out, rollout.Options{AgentURL: agent.URL, Concurrency: 4})
	var res collectResult
	select {
	case res = <-done:
	case <-time.After(hangGuard):
		t.Fatal("Collect did not return after cancellation")
	}
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", res.err)
	}
	sum := res.sum
	if sum.Failed != 0 || sum.Succeeded > quick || sum.Remaining() < 200-quick {
		t.Fatalf("summary %+v: cancelled rollouts must not be recorded as failures", sum)
	}
	recs := readRecords(t, out) // every line complete and valid
	if len(recs) != sum.Succeeded {
		t.Fatalf("%d lines, %d rollouts counted", len(recs), sum.Succeeded)
	}
	if n := len(agent.Seen()); n > quick+4 {
		t.Fatalf("agent got %d requests: tasks were handed out after the cancel", n)
	}

	// Resuming picks up where the cancelled run stopped.
	sum2, err := rollout.Collect(context.Background(), dataset.Arithmetic(200, 8), out, rollout.Options{AgentURL: startAgent(t, nil).URL})
	if err != nil || sum2.Skipped != sum.Succeeded || sum2.Succeeded != 200-sum.Succeeded {
		t.Fatalf("resume: %+v, %v", sum2, err)
	}
}

func TestCollectWriteErrorStops(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	agent := startAgent(t, nil)
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(20, 9), "/dev/full", rollout.Options{AgentURL: agent.URL, Concurrency: 2})
	if err == nil || !strings.Contains(err.Error(), "write output") {
		t.Fatalf("err = %v", err)
	}
	if sum.Succeeded+sum.Failed != 0 {
		t.Fatalf("summary %+v counts rollouts that were never written", sum)
	}
	if n := len(agent.Seen()); n > 4 {
		t.Fatalf("the run went on after the write failed: %d requests", n)
	}
}

func TestCollectProgress(t *testing.T) {
	agent := startAgent(t, nil)
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			var buf bytes.Buffer
			_, err := rollout.Collect(context.Background(), dataset.Arithmetic(25, 10), outPath(t),
				rollout.Options{AgentURL: agent.URL, Progress: &buf, ProgressTTY: tty})
			if err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if !strings.Contains(got, "25/25") || !strings.Contains(got, "100%") || !strings.Contains(got, "/s") {
				t.Fatalf("progress %q lacks done/total, percent or rate", got)
			}
			if !strings.HasSuffix(got, "\n") {
				t.Fatalf("progress %q does not end its line", got)
			}
			if tty != strings.Contains(got, "\r") {
				t.Fatalf("tty=%v but output %q", tty, got)
			}
			if tty && !strings.Contains(got, "[====================]") {
				t.Fatalf("no full bar in %q", got)
			}
			if !tty && !strings.HasPrefix(got, "rollouts: ") {
				t.Fatalf("plain progress %q", got)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{40, 10, 30, 20, 50} // unsorted on purpose
	for _, tc := range []struct{ p, want float64 }{
		{0, 10}, {50, 30}, {100, 50}, {25, 20}, {10, 14}, {95, 48}, {-5, 10}, {150, 50},
	} {
		if got := rollout.Percentile(v, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !slices.Equal(v, []float64{40, 10, 30, 20, 50}) {
		t.Fatal("Percentile modified its input")
	}
	if got := rollout.Percentile(nil, 50); got != 0 {
		t.Fatalf("no values: %v", got)
	}
	if got := rollout.Percentile([]float64{7}, 95); got != 7 {
		t.Fatalf("one value: %v", got)
	}
}

func ExamplePercentile() {
	durations := []float64{120, 80, 100, 300, 90}
	fmt.Printf("p50 %.0f ms, p95 %.0f ms\n", rollout.Percentile(durations, 50), rollout.Percentile(durations, 95))
	// Output: p50 100 ms, p95 264 ms
}

// Closing Options.Stop lets the rollouts in flight finish and be recorded,
// starts no new one, and reports ErrStopped.
func TestCollectStopFinishesInFlight(t *testing.T) {
	stop := make(chan struct{})
	entered := make(chan struct{}, 64)
	release := make(chan struct{})
	agent := startAgent(t, func(ctx context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
		entered <- struct{}{}
		<-release
		return protocol.RunResponse{TaskID: req.Task.ID, Error: "model call failed: peer gone"}, nil
	})
	const concurrency = 3
	out := outPath(t)
	done := collectAsync(context.Background(), dataset.Arithmetic(50, 3), out,
		rollout.Options{AgentURL: agent.URL, Concurrency: concurrency, Stop: stop})
	for range concurrency {
		<-entered // every worker holds one rollout
	}
	close(stop)
	close(release)
	r := <-done
	if !errors.Is(r.err, rollout.ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", r.err)
	}
	recs := readRecords(t, out)
	if len(recs) != concurrency || r.sum.Failed != concurrency {
		t.Fatalf("%d records, %d failed; want the %d in flight, recorded as failures", len(recs), r.sum.Failed, concurrency)
	}
	if n := len(agent.Seen()); n != concurrency {
		t.Fatalf("agent saw %d rollouts after Stop; want only the %d in flight", n, concurrency)
	}
}

// collectResult is what Collect returned.
type collectResult struct {
	sum rollout.Summary
	err error
}

// collectAsync runs Collect in a goroutine; its result arrives on the
// channel.
func collectAsync(ctx context.Context, tasks []protocol.Task, out string, opts rollout.Options) <-chan collectResult {
	done := make(chan collectResult, 1)
	go func() {
		sum, err := rollout.Collect(ctx, tasks, out, opts)
		done <- collectResult{sum, err}
	}()
	return done
}
