package live

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the tests' clock origin, on a second boundary.
var t0 = time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

func TestEpisodesReport(t *testing.T) {
	var e Episodes
	a := e.Begin("3-1", at(0))
	b := e.Begin("4-0", at(10))
	anon := e.Begin("", at(20)) // not reported; its steps count

	a.Enter(StageSeed, 0, at(100))
	a.Leave(200, false, at(150))
	a.Enter(StageModel, 1, at(200))

	b.Enter(StageSeed, 0, at(100))
	b.Leave(500, false, at(400)) // a status of 400 or more fails the step

	anon.Enter(StageSeed, 0, at(100))
	anon.Leave(0, true, at(110))

	rep := e.Report("agent_a", at(1000))
	if rep.Server != "agent_a" || !rep.Time.Equal(at(1000)) || rep.WindowSeconds != WindowSeconds || rep.Truncated != 0 {
		t.Fatalf("report header: %+v", rep)
	}
	if len(rep.Episodes) != 2 {
		t.Fatalf("episodes: got %d, want 2: %+v", len(rep.Episodes), rep.Episodes)
	}
	ea, eb := rep.Episodes[0], rep.Episodes[1]
	if ea.RolloutID != "3-1" || eb.RolloutID != "4-0" {
		t.Fatalf("order: got %s, %s; want the longest-running (3-1) first", ea.RolloutID, eb.RolloutID)
	}
	if ea.Stage != StageModel || ea.Turn != 1 || !ea.StageStart.Equal(at(200)) || !ea.Start.Equal(at(0)) ||
		!ea.LastProgress.Equal(at(150)) {
		t.Errorf("episode 3-1: %+v", ea)
	}
	want := []Step{{Stage: StageSeed, Start: at(100), DurationMS: 50, Status: 200}}
	if fmt.Sprint(ea.Steps) != fmt.Sprint(want) {
		t.Errorf("episode 3-1 steps: got %+v, want %+v", ea.Steps, want)
	}
	// Between steps an episode is at the agent's own work, StageRun.
	if eb.Stage != StageRun || !eb.StageStart.Equal(at(400)) || len(eb.Steps) != 1 || eb.Steps[0].Status != 500 {
		t.Errorf("episode 4-0: %+v", eb)
	}

	if len(rep.Stages) != 4 {
		t.Fatalf("stages: %+v", rep.Stages)
	}
	for i, st := range []Stage{StageSeed, StageModel, StageTool, StageVerify} {
		if rep.Stages[i].Stage != st {
			t.Errorf("stage %d: got %s, want %s", i, rep.Stages[i].Stage, st)
		}
	}
	seed := rep.Stages[0]
	if seed.Count != 3 || seed.Failed != 2 || math.Abs(seed.SuccessRate-1.0/3) > 1e-9 {
		t.Errorf("seed_session stats: %+v", seed)
	}
	// Durations 10, 50 and 300 ms: p50 reads the 50 ms step, p95 and p99
	// the 300 ms one, each within 5 %.
	near(t, "p50", seed.P50MS, 50)
	near(t, "p95", seed.P95MS, 300)
	near(t, "p99", seed.P99MS, 300)
	if m := rep.Stages[1]; m.Count != 0 || m.P50MS != 0 || m.SuccessRate != 0 {
		t.Errorf("model_call has an open step only, counted nowhere yet: %+v", m)
	}

	a.Leave(200, false, at(700))
	a.End()
	b.End()
	anon.End()
	a.End() // a second End does nothing
	rep = e.Report("agent_a", at(1000))
	if len(rep.Episodes) != 0 || rep.Truncated != 0 {
		t.Errorf("after End: %+v", rep.Episodes)
	}
	if m := rep.Stages[1]; m.Count != 1 || m.Failed != 0 || m.SuccessRate != 1 {
		t.Errorf("model_call after its step: %+v", m)
	}
	near(t, "model_call p50", rep.Stages[1].P50MS, 500)
}

// near fails unless got is within 5 % of want.
func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.05*want {
		t.Errorf("%s: got %g, want %g within 5 %%", what, got, want)
	}
}

func TestEpisodesWindowForgets(t *testing.T) {
	var e Episodes
	h := e.Begin("", t0)
	step := func(endMS float64) {
		h.Enter(StageTool, 1, at(endMS-5))
		h.Leave(200, false, at(endMS))
	}
	count := func(nowMS float64) int64 { return e.Report("a", at(nowMS)).Stages[2].Count }
	step(500)    // second 0
	step(30_000) // second 30
	step(59_999) // second 59
	if got := count(59_999); got != 3 {
		t.Errorf("at 59.999 s: %d steps, want 3 (seconds 0, 30, 59)", got)
	}
	step(60_000.5) // second 60: second 0's bucket, reused
	if got := count(60_000); got != 3 {
		t.Errorf("at 60 s: %d steps, want 3 (seconds 30, 59, 60)", got)
	}
	step(119_000.5) // second 119
	if got := count(119_500); got != 2 {
		t.Errorf("at 119.5 s: %d steps, want 2 (seconds 60, 119)", got)
	}
	if got := count(500_000); got != 0 {
		t.Errorf("long after: %d steps, want 0", got)
	}
}

func TestEpisodesStepsBounded(t *testing.T) {
	var e Episodes
	h := e.Begin("long", t0)
	const n = 10 * MaxSteps
	for i := range n {
		h.Enter(StageModel, i+1, at(float64(i)))
		h.Leave(200, false, at(float64(i)+0.5))
	}
	rep := e.Report("a", at(n))
	steps := rep.Episodes[0].Steps
	if len(steps) != MaxSteps {
		t.Fatalf("steps: %d, want MaxSteps (%d)", len(steps), MaxSteps)
	}
	for i, s := range steps {
		if want := n - MaxSteps + i + 1; s.Turn != want {
			t.Errorf("step %d: turn %d, want %d (the most recent, oldest first)", i, s.Turn, want)
		}
	}
	if c := rep.Stages[1].Count; c != n {
		t.Errorf("model_call count: %d, want %d", c, n)
	}
}

func TestEpisodesTruncated(t *testing.T) {
	var e Episodes
	const extra = 7
	var hs []*EpisodeHandle
	// Begun in reverse order of start, so that the order shown is the
	// report's own.
	for i := MaxEpisodes + extra - 1; i >= 0; i-- {
		hs = append(hs, e.Begin(fmt.Sprintf("r%d", i), at(float64(i))))
	}
	rep := e.Report("a", at(1e7))
	if len(rep.Episodes) != MaxEpisodes || rep.Truncated != extra {
		t.Fatalf("got %d episodes, %d truncated; want %d, %d", len(rep.Episodes), rep.Truncated, MaxEpisodes, extra)
	}
	for i, ep := range rep.Episodes {
		if want := fmt.Sprintf("r%d", i); ep.RolloutID != want {
			t.Fatalf("episode %d: %s, want %s (longest-running first)", i, ep.RolloutID, want)
		}
	}
	for _, h := range hs {
		h.End()
	}
	if rep := e.Report("a", at(1e7)); len(rep.Episodes) != 0 || rep.Truncated != 0 || e.first != nil || e.inFlight != 0 {
		t.Errorf("after every End: %d episodes, %d truncated, %d in flight", len(rep.Episodes), rep.Truncated, e.inFlight)
	}
}

// TestHistogramAccuracy checks every percentile against the durations it
// summarises: within 5 % from 10 µs to an hour.
func TestHistogramAccuracy(t *testing.T) {
	for ms := histMinMS; ms <= 3.6e6; ms *= 1.0137 {
		if got := binValueMS(histBin(ms)); math.Abs(got-ms) > 0.05*ms {
			t.Fatalf("a %g ms step reads %g ms (%.1f %% off)", ms, got, 100*math.Abs(got-ms)/ms)
		}
	}
	// 1000 steps of 1..1000 ms.
	var e Episodes
	h := e.Begin("", t0)
	for i := 1; i <= 1000; i++ {
		h.Enter(StageModel, 1, t0)
		h.Leave(200, false, at(float64(i)))
	}
	st := e.Report("a", t0).Stages[1]
	near(t, "p50", st.P50MS, 500)
	near(t, "p95", st.P95MS, 950)
	near(t, "p99", st.P99MS, 990)
}

func TestEpisodesNil(t *testing.T) {
	var e *Episodes
	h := e.Begin("x", t0)
	if h != nil {
		t.Fatal("a nil registry returns a nil handle")
	}
	h.Enter(StageModel, 1, t0)
	h.Leave(200, false, t0)
	h.End()
	rep := e.Report("a", t0)
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"episodes":[]`) || !strings.Contains(string(raw), `"stages":[]`) {
		t.Errorf("empty report: %s", raw)
	}
	// A Leave without Enter records nothing.
	var e2 Episodes
	h = e2.Begin("y", t0)
	h.Leave(200, false, t0)
	if rep := e2.Report("a", t0); len(rep.Episodes[0].Steps) != 0 || rep.Stages[0].Count+rep.Stages[1].Count != 0 {
		t.Errorf("Leave without Enter: %+v", rep)
	}
}

// TestEpisodesConcurrent runs episodes and reports at once (under the race
// detector, the test is that it finds nothing); every step is counted.
func TestEpisodesConcurrent(t *testing.T) {
	var e Episodes
	const workers, episodes, steps = 8, 50, 6
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = e.Report("a", time.Now())
			}
		}
	}()
	var work sync.WaitGroup
	for w := range workers {
		work.Add(1)
		go func() {
			defer work.Done()
			for i := range episodes {
				id := ""
				if i%2 == 0 {
					id = fmt.Sprintf("%d-%d", w, i)
				}
				h := e.Begin(id, time.Now())
				for s := range steps {
					h.Enter(StageTool, s+1, time.Now())
					h.Leave(200, false, time.Now())
				}
				h.End()
			}
		}()
	}
	work.Wait()
	close(stop)
	wg.Wait()
	rep := e.Report("a", time.Now())
	if len(rep.Episodes) != 0 {
		t.Errorf("%d episodes left in flight", len(rep.Episodes))
	}
	if c := rep.Stages[2].Count; c != workers*episodes*steps {
		t.Errorf("tool_call count %d, want %d", c, workers*episodes*steps)
	}
}

// BenchmarkEpisodeStep measures one step (Enter and Leave, each with the
// clock read the agent makes for it) against a baseline doing the same
// clock reads and nothing else, with an episode of every other agent
// in flight; the parallel forms have every goroutine step its own
// episode.
func BenchmarkEpisodeStep(b *testing.B) {
	var e Episodes
	for i := range 1000 {
		defer e.Begin(fmt.Sprintf("bg-%d", i), time.Now()).End()
	}
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		var sink time.Time
		for b.Loop() {
			sink = time.Now()
			sink = time.Now()
		}
		_ = sink
	})
	b.Run("step", func(b *testing.B) {
		h := e.Begin("bench", time.Now())
		defer h.End()
		b.ReportAllocs()
		for b.Loop() {
			h.Enter(StageModel, 1, time.Now())
			h.Leave(200, false, time.Now())
		}
	})
	b.Run("baseline-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var sink time.Time
			for pb.Next() {
				sink = time.Now()
				sink = time.Now()
			}
			_ = sink
		})
	})
	b.Run("step-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			h := e.Begin("bench", time.Now())
			defer h.End()
			for pb.Next() {
				h.Enter(StageModel, 1, time.Now())
				h.Leave(200, false, time.Now())
			}
		})
	})
}

// BenchmarkEpisodeRollout measures the registry's whole share of a
// rollout of one tool call: Begin, the five steps of seed_session, two
// model calls, the tool call and verify (clock reads included), End.
func BenchmarkEpisodeRollout(b *testing.B) {
	var e Episodes
	b.ReportAllocs()
	for b.Loop() {
		h := e.Begin("3-1", time.Now())
		for _, st := range [...]Stage{StageSeed, StageModel, StageTool, StageModel, StageVerify} {
			h.Enter(st, 1, time.Now())
			h.Leave(200, false, time.Now())
		}
		h.End()
	}
}
