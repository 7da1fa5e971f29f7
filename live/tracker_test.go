package live_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gymlens/gymlens/live"
)

// clock is a fake time source, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// origin is the fake clocks' start, on a second boundary.
var origin = time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)

func newClock() *clock { return &clock{t: origin} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// set moves the clock to origin+d.
func (c *clock) set(d time.Duration) {
	c.mu.Lock()
	c.t = origin.Add(d)
	c.mu.Unlock()
}

func newTracker(t *testing.T, r live.Rules, c *clock) *live.Tracker {
	t.Helper()
	tr, err := live.NewTracker(r, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func ident(task, repeat int, agent string) live.Identity {
	return live.Identity{TaskIndex: task, Repeat: repeat, RolloutID: fmt.Sprintf("%d-%d", task, repeat), Agent: agent}
}

// one returns the rollout id's entry in a snapshot, failing when absent.
func one(t *testing.T, tr *live.Tracker, id string) live.Rollout {
	t.Helper()
	s := tr.Snapshot(live.Filter{RolloutID: id})
	if len(s.Rollouts) != 1 {
		t.Fatalf("rollout %s: %d entries in the snapshot, want 1", id, len(s.Rollouts))
	}
	return s.Rollouts[0]
}

func stateOf(t *testing.T, tr *live.Tracker, id string) live.State {
	t.Helper()
	return one(t, tr, id).State
}

func TestRulesValidate(t *testing.T) {
	if err := live.DefaultRules().Validate(); err != nil {
		t.Fatalf("default rules: %v", err)
	}
	bad := []live.Rules{
		{SlowFactor: 0.5, StallFactor: 10, SlowFloor: time.Second, StallFloor: time.Second},
		{SlowFactor: 3, StallFactor: math.Inf(1), SlowFloor: time.Second, StallFloor: time.Second},
		{SlowFactor: 3, StallFactor: 10, SlowFloor: 0, StallFloor: time.Second},
		{SlowFactor: 3, StallFactor: 10, SlowFloor: time.Second, StallFloor: -time.Second},
		{},
	}
	for _, r := range bad {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", r)
		}
		if _, err := live.NewTracker(r, nil); err == nil {
			t.Errorf("NewTracker(%+v): no error", r)
		}
	}
	err := live.Rules{}.Validate()
	for _, name := range []string{"SlowFactor", "StallFactor", "SlowFloor", "StallFloor"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

// Every state a rollout goes through, with no baseline: the floors times
// the factors decide (slow after 2 × 1 s, stalled after 4 × 2 s).
func TestTrackerStates(t *testing.T) {
	c := newClock()
	tr := newTracker(t, live.Rules{SlowFactor: 2, StallFactor: 4, SlowFloor: time.Second, StallFloor: 2 * time.Second}, c)
	tr.SetRunID("run-1")
	tr.Queue("a", 4)
	tr.Skip(2)
	s := tr.Snapshot(live.Filter{})
	if s.Total != 6 || s.Skipped != 2 || s.Counts.Queued != 4 || len(s.Rollouts) != 0 || s.RunID != "run-1" {
		t.Fatalf("queued: %+v", s)
	}

	h := tr.Start(ident(0, 0, "a"))
	if got := stateOf(t, tr, "0-0"); got != live.Active {
		t.Errorf("started: %s, want active", got)
	}
	c.advance(1999 * time.Millisecond)
	if got := stateOf(t, tr, "0-0"); got != live.Active {
		t.Errorf("1.999 s: %s, want active", got)
	}
	c.advance(time.Millisecond)
	if got := stateOf(t, tr, "0-0"); got != live.Slow {
		t.Errorf("2 s: %s, want slow", got)
	}
	c.set(8 * time.Second)
	ro := one(t, tr, "0-0")
	if ro.State != live.Stalled || ro.SinceProgressMS != 8000 || ro.Stage != live.StageRun || ro.ElapsedMS != 8000 {
		t.Errorf("8 s: %+v, want stalled for 8 s at stage run", ro)
	}

	// A failed attempt: retrying. Its 8 s are now the /run baseline
	// (slow after 2 × 8 s, stalled after 4 × 8 s), so it is no longer
	// stalled.
	h.Retrying("TimeoutError", 0)
	if got := stateOf(t, tr, "0-0"); got != live.Retrying {
		t.Errorf("retrying: %s, want retrying", got)
	}
	h.Attempt(1, "0-0-a1") // the next attempt is progress
	ro = one(t, tr, "0-0-a1")
	if ro.State != live.Retrying || ro.Attempt != 1 || ro.ErrorClass != "TimeoutError" || ro.SinceProgressMS != 0 {
		t.Errorf("second attempt: %+v, want retrying at attempt 1", ro)
	}
	if s := tr.Snapshot(live.Filter{RolloutID: "0-0"}); len(s.Rollouts) != 0 {
		t.Errorf("the first attempt's id still lists %+v", s.Rollouts)
	}
	c.advance(30 * time.Second)
	if got := stateOf(t, tr, "0-0-a1"); got != live.Retrying {
		t.Errorf("second attempt 30 s without progress: %s, want retrying", got)
	}
	c.advance(4 * time.Second) // past 4 × p95 (8 s, within 5 %)
	if got := stateOf(t, tr, "0-0-a1"); got != live.Stalled {
		t.Errorf("second attempt 34 s without progress: %s, want stalled", got)
	}
	h.SetTraceID("0af7651916cd43dd8448eb211c80319c")
	h.Finish(live.Done, 200, "")
	h.Finish(live.Failed, 500, "x") // a second Finish does nothing
	h.Attempt(2, "0-0-a2")          // nor anything after

	h2 := tr.Start(ident(1, 0, "a"))
	c.advance(time.Second)
	h2.Finish(live.Failed, 502, "ClientResponseError")
	h3 := tr.Start(ident(2, 0, "a"))
	c.advance(time.Second)
	h3.Finish(live.Cancelled, 0, "")
	tr.End()
	tr.End()
	s = tr.Snapshot(live.Filter{})
	c.advance(time.Hour) // an ended run's elapsed time stands still
	if later := tr.Snapshot(live.Filter{}); later.ElapsedMS != s.ElapsedMS || later.Counts != s.Counts {
		t.Errorf("an hour after the end: elapsed %v ms, counts %+v; want %v, %+v", later.ElapsedMS, later.Counts, s.ElapsedMS, s.Counts)
	}

	want := live.Counts{Done: 1, Failed: 1, Cancelled: 2}
	if s.Counts != want || !s.Ended || s.ElapsedMS != 44000 || s.Total != 6 {
		t.Errorf("ended: counts %+v, ended %v, elapsed %v ms, total %d; want %+v, true, 44000, 6", s.Counts, s.Ended, s.ElapsedMS, s.Total, want)
	}
	done := one(t, tr, "0-0-a1")
	if done.State != live.Done || done.Status != 200 || done.TraceID != "0af7651916cd43dd8448eb211c80319c" ||
		done.ElapsedMS != 42000 || !done.End.Equal(origin.Add(42*time.Second)) || done.ErrorClass != "TimeoutError" {
		t.Errorf("done: %+v", done)
	}
	failed := tr.Snapshot(live.Filter{State: live.Failed})
	if len(failed.Rollouts) != 1 || failed.Rollouts[0].RolloutID != "1-0" || failed.Rollouts[0].Status != 502 ||
		failed.Rollouts[0].ErrorClass != "ClientResponseError" {
		t.Errorf("failed: %+v", failed.Rollouts)
	}
	cancelled := tr.Snapshot(live.Filter{State: live.Cancelled})
	if len(cancelled.Rollouts) != 1 || cancelled.Rollouts[0].RolloutID != "2-0" {
		t.Errorf("cancelled: %+v (the queued one is a count only)", cancelled.Rollouts)
	}
	if len(s.Servers) != 1 {
		t.Fatalf("servers: %+v", s.Servers)
	}
	srv := s.Servers[0]
	if srv.Agent != "a" || srv.Done != 1 || srv.Failed != 1 || srv.Cancelled != 2 || srv.Queued != 0 || srv.InFlight != 0 ||
		srv.Run.Count != 3 || srv.Run.Failed != 2 || srv.Reporting {
		t.Errorf("server: %+v; want 1 done, 1 failed, 2 cancelled, 3 /run attempts timed (2 failed)", srv)
	}
}

// An agent's report: its episodes' stage, turn, steps and progress, and
// its stages' p95, which the rules scale; a p95 under the floor leaves
// the floor in charge.
func TestTrackerObserveAndRules(t *testing.T) {
	c := newClock()
	tr := newTracker(t, live.Rules{SlowFactor: 3, StallFactor: 10, SlowFloor: time.Second, StallFloor: 2 * time.Second}, c)
	tr.Queue("agent", 2)
	tr.Start(ident(0, 0, "agent"))
	tr.Start(ident(1, 0, "agent"))
	c.advance(500 * time.Millisecond)

	// The agent's clock runs an hour ahead: only ages count.
	agentNow := c.now().Add(time.Hour)
	report := func(model95 float64) live.EpisodesReport {
		return live.EpisodesReport{Server: "agent", Time: agentNow, WindowSeconds: 60,
			Episodes: []live.Episode{
				{RolloutID: "0-0", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Stage: live.StageModel, Turn: 2,
					StageStart: agentNow.Add(-100 * time.Millisecond), Start: agentNow.Add(-400 * time.Millisecond),
					LastProgress: agentNow.Add(-100 * time.Millisecond),
					Steps:        []live.Step{{Stage: live.StageSeed, Start: agentNow.Add(-400 * time.Millisecond), DurationMS: 300, Status: 200}}},
				{RolloutID: "1-0", Stage: live.StageTool, Turn: 1, StageStart: agentNow, Start: agentNow, LastProgress: agentNow},
				{RolloutID: "9-9", Stage: live.StageVerify}, // no such rollout in flight: ignored
			},
			Stages: []live.StageStats{{Stage: live.StageModel, Count: 100, SuccessRate: 1, P50MS: 500, P95MS: model95, P99MS: model95}}}
	}
	tr.Observe("agent", report(2000))
	ro := one(t, tr, "0-0")
	if ro.Stage != live.StageModel || ro.Turn != 2 || len(ro.Steps) != 1 || ro.Steps[0].DurationMS != 300 ||
		ro.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || ro.StageElapsedMS != 100 || ro.SinceProgressMS != 100 ||
		ro.State != live.Active {
		t.Errorf("observed: %+v", ro)
	}
	// model_call's p95 is 2 s: slow after 6 s in it, stalled after 20 s
	// without progress.
	c.advance(5899 * time.Millisecond)
	if got := stateOf(t, tr, "0-0"); got != live.Active {
		t.Errorf("5.999 s in model_call: %s, want active", got)
	}
	c.advance(time.Millisecond)
	if got := stateOf(t, tr, "0-0"); got != live.Slow {
		t.Errorf("6 s in model_call: %s, want slow", got)
	}
	// tool_call has no step in the window: no baseline, so 3 × 1 s and
	// 10 × 2 s.
	if got := stateOf(t, tr, "1-0"); got != live.Slow {
		t.Errorf("5.9 s in tool_call without a baseline: %s, want slow", got)
	}
	c.advance(13900 * time.Millisecond)
	if got := stateOf(t, tr, "0-0"); got != live.Slow {
		t.Errorf("19.9 s without progress: %s, want slow", got)
	}
	c.advance(200 * time.Millisecond) // 20 s since both last progressed
	s := tr.Snapshot(live.Filter{})
	if s.Counts.Stalled != 2 || s.Servers[0].Stalled != 2 || !s.Servers[0].Reporting || len(s.Servers[0].Stages) != 1 {
		t.Errorf("20 s: counts %+v, server %+v; want both stalled", s.Counts, s.Servers[0])
	}

	// A new report with progress: active again. A p95 of 20 ms puts the
	// floors in charge: slow after 1 s, stalled after 2 s.
	agentNow = agentNow.Add(time.Minute)
	tr.Observe("agent", report(20))
	if got := stateOf(t, tr, "0-0"); got != live.Active {
		t.Errorf("after progress: %s, want active", got)
	}
	c.advance(time.Second)
	if got := stateOf(t, tr, "0-0"); got != live.Slow {
		t.Errorf("1 s into a 20 ms stage: %s, want slow", got)
	}
	c.advance(time.Second)
	if got := stateOf(t, tr, "0-0"); got != live.Stalled {
		t.Errorf("2 s without progress after 20 ms steps: %s, want stalled", got)
	}
}

// An agent that reports no stages: the collector's own /run durations of
// the last minute are the baseline.
func TestTrackerRunBaseline(t *testing.T) {
	c := newClock()
	tr := newTracker(t, live.Rules{SlowFactor: 3, StallFactor: 10, SlowFloor: time.Millisecond, StallFloor: time.Millisecond}, c)
	for i := range 20 {
		h := tr.Start(ident(i, 0, "a"))
		c.advance(2 * time.Second)
		h.Finish(live.Done, 200, "")
	}
	tr.Start(ident(99, 0, "a"))
	s := tr.Snapshot(live.Filter{})
	run := s.Servers[0].Run
	if run.Count != 20 || run.P95MS < 1900 || run.P95MS > 2100 {
		t.Fatalf("the /run window: %+v, want 20 calls with a p95 near 2 s", run)
	}
	// p95 within 5 % of 2 s: slow from about 6 s, stalled from about 20 s.
	for _, step := range []struct {
		at   time.Duration
		want live.State
	}{{5500 * time.Millisecond, live.Active}, {6500 * time.Millisecond, live.Slow}, {19 * time.Second, live.Slow}, {22 * time.Second, live.Stalled}} {
		c.set(40*time.Second + step.at)
		if got := stateOf(t, tr, "99-0"); got != step.want {
			t.Errorf("%v into /run: %s, want %s", step.at, got, step.want)
		}
	}
	// A minute later the window is empty: no baseline, factor × floor.
	c.advance(2 * time.Minute)
	if s := tr.Snapshot(live.Filter{}); s.Servers[0].Run.Count != 0 || s.RatePerSecond != 0 {
		t.Errorf("two minutes on: %+v, rate %v; want an empty window", s.Servers[0].Run, s.RatePerSecond)
	}
}

// The list: stalled first, then slow, retrying, active, each the longest
// without progress first; limits, truncation and the state filter.
func TestSnapshotSelection(t *testing.T) {
	c := newClock()
	tr := newTracker(t, live.Rules{SlowFactor: 1, StallFactor: 1, SlowFloor: 10 * time.Second, StallFloor: 100 * time.Second}, c)
	// Rollout i starts at i seconds; at 200 s rollouts 0..100 are
	// stalled (≥ 100 s), 101..190 slow (≥ 10 s), 195 retrying and the
	// other 8 of 191..199 active.
	var hs []*live.Handle
	for i := range 200 {
		c.set(time.Duration(i) * time.Second)
		hs = append(hs, tr.Start(ident(i, 0, "a")))
	}
	c.set(200 * time.Second)
	hs[195].Retrying("ClientConnectorError", 0)
	s := tr.Snapshot(live.Filter{})
	if s.Counts.Stalled != 101 || s.Counts.Slow != 90 || s.Counts.Retrying != 1 || s.Counts.Active != 8 {
		t.Errorf("counts %+v", s.Counts)
	}
	if len(s.Rollouts) != live.DefaultLimit || s.Truncated != 200-live.DefaultLimit {
		t.Errorf("%d listed, %d truncated", len(s.Rollouts), s.Truncated)
	}
	for i, ro := range s.Rollouts {
		if ro.TaskIndex != i || ro.State != live.Stalled {
			t.Fatalf("entry %d: task %d %s, want the longest stalled first", i, ro.TaskIndex, ro.State)
		}
	}
	all := tr.Snapshot(live.Filter{Limit: 1000})
	if len(all.Rollouts) != 200 || all.Truncated != 0 {
		t.Fatalf("limit 1000 (capped at %d): %d listed", live.MaxLimit, len(all.Rollouts))
	}
	order := []live.State{}
	for _, ro := range all.Rollouts {
		if len(order) == 0 || order[len(order)-1] != ro.State {
			order = append(order, ro.State)
		}
	}
	if fmt.Sprint(order) != fmt.Sprint([]live.State{live.Stalled, live.Slow, live.Retrying, live.Active}) {
		t.Errorf("order of states %v", order)
	}
	slow := tr.Snapshot(live.Filter{State: live.Slow, Limit: 3})
	if len(slow.Rollouts) != 3 || slow.Truncated != 87 || slow.Rollouts[0].TaskIndex != 101 {
		t.Errorf("slow, limit 3: %+v, truncated %d", slow.Rollouts, slow.Truncated)
	}
	if q := tr.Snapshot(live.Filter{State: live.Queued}); len(q.Rollouts) != 0 {
		t.Errorf("queued lists %d", len(q.Rollouts))
	}
	for _, f := range []live.Filter{{State: "running"}, {State: "DONE"}} {
		if f.Validate() == nil {
			t.Errorf("%+v valid", f)
		}
	}
	for _, st := range []live.State{"", live.Queued, live.Active, live.Slow, live.Retrying, live.Stalled, live.Failed, live.Cancelled, live.Done} {
		if err := (live.Filter{State: st}).Validate(); err != nil {
			t.Errorf("state %q: %v", st, err)
		}
	}

	// The ring keeps the RingSize most recent, newest first.
	for _, h := range hs {
		h.Finish(live.Done, 200, "")
	}
	done := tr.Snapshot(live.Filter{State: live.Done, Limit: live.MaxLimit})
	if len(done.Rollouts) != live.RingSize || done.Rollouts[0].TaskIndex != 199 || done.Rollouts[live.RingSize-1].TaskIndex != 200-live.RingSize {
		t.Errorf("done ring: %d, first %d", len(done.Rollouts), done.Rollouts[0].TaskIndex)
	}
	if s := tr.Snapshot(live.Filter{RolloutID: "3-0"}); len(s.Rollouts) != 0 {
		t.Errorf("a rollout out of the ring is still listed: %+v", s.Rollouts)
	}
}

// A run of 100 000 rollouts: the snapshot's JSON stays within a bound
// that does not grow with the count, the series within MaxPoints.
func TestSnapshotBounded(t *testing.T) {
	const bound = 256 << 10
	c := newClock()
	tr := newTracker(t, live.DefaultRules(), c)
	const n = 100_000
	tr.Queue("simple_agent", n)
	size := func() int {
		worst := 0
		for _, f := range []live.Filter{{}, {State: live.Done, Limit: live.MaxLimit}, {State: live.Failed, Limit: live.MaxLimit}} {
			b, err := json.Marshal(tr.Snapshot(f))
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, len(b))
		}
		return worst
	}
	steps := make([]live.Step, 2*live.MaxSteps)
	for i := range steps {
		steps[i] = live.Step{Stage: live.StageModel, Turn: i, Start: origin, DurationMS: 1, Status: 200}
	}
	var sizes []int
	const conc = 64
	inFlight := make([]*live.Handle, 0, conc)
	for i := range n {
		inFlight = append(inFlight, tr.Start(ident(i, 0, "simple_agent")))
		if len(inFlight) == conc {
			eps := make([]live.Episode, len(inFlight))
			for j := range eps {
				eps[j] = live.Episode{RolloutID: fmt.Sprintf("%d-0", i-conc+1+j), Stage: live.StageModel, Steps: steps}
			}
			tr.Observe("simple_agent", live.EpisodesReport{Time: c.now(), Episodes: eps})
			for j, h := range inFlight {
				if j%10 == 0 {
					h.Finish(live.Failed, 500, "ClientResponseError")
				} else {
					h.Finish(live.Done, 200, "")
				}
			}
			inFlight = inFlight[:0]
		}
		c.advance(200 * time.Millisecond) // 20 000 s: past 720 points of 5 s
		if i == 999 || i == n-conc {
			sizes = append(sizes, size())
		}
	}
	for _, h := range inFlight {
		h.Finish(live.Done, 200, "")
	}
	tr.End()
	sizes = append(sizes, size())
	s := tr.Snapshot(live.Filter{})
	if s.Counts.Done+s.Counts.Failed != n || s.Total != n || s.Counts.Queued != 0 {
		t.Errorf("counts %+v, total %d", s.Counts, s.Total)
	}
	if len(s.Series.Points) > live.MaxPoints || s.Series.StepSeconds <= live.SeriesStep.Seconds() {
		t.Errorf("series: %d points of %v s", len(s.Series.Points), s.Series.StepSeconds)
	}
	var sum int64
	for _, p := range s.Series.Points {
		sum += p.Done + p.Failed
	}
	if sum != n {
		t.Errorf("the series counts %d rollouts, want %d", sum, n)
	}
	t.Logf("snapshot JSON sizes after 1 000, %d and %d rollouts: %v bytes (series %d points of %v s)",
		n-conc+1, n, sizes, len(s.Series.Points), s.Series.StepSeconds)
	for _, sz := range sizes {
		if sz > bound {
			t.Errorf("snapshot of %d bytes, bound %d", sz, bound)
		}
	}
	ro := tr.Snapshot(live.Filter{State: live.Failed}).Rollouts[0]
	if len(ro.Steps) != live.MaxSteps {
		t.Errorf("a rollout keeps %d steps, want at most %d", len(ro.Steps), live.MaxSteps)
	}
}

// A nil tracker and a nil handle do nothing.
func TestNilTracker(t *testing.T) {
	var tr *live.Tracker
	tr.Queue("a", 1)
	tr.Skip(1)
	tr.SetRunID("x")
	tr.Observe("a", live.EpisodesReport{})
	tr.End()
	h := tr.Start(ident(0, 0, "a"))
	h.Attempt(1, "0-0-a1")
	h.Retrying("x", 0)
	h.SetTraceID("x")
	h.Finish(live.Done, 200, "")
	s := tr.Snapshot(live.Filter{})
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"rollouts":[]`) || !strings.Contains(string(b), `"servers":[]`) {
		t.Errorf("nil tracker's snapshot: %s", b)
	}
}

// The tracker is used from the collector's workers, the poller and the
// status API at once (run with -race).
func TestTrackerConcurrent(t *testing.T) {
	tr, err := live.NewTracker(live.DefaultRules(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.Queue("a", 800)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				h := tr.Start(ident(w*100+i, 0, "a"))
				h.Retrying("TimeoutError", 0)
				h.Attempt(1, fmt.Sprintf("%d-0-a1", w*100+i))
				h.Finish(live.Done, 200, "")
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			tr.Observe("a", live.EpisodesReport{Time: time.Now(), Episodes: []live.Episode{{RolloutID: "1-0", Stage: live.StageModel}}})
			_, _ = json.Marshal(tr.Snapshot(live.Filter{}))
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	if s := tr.Snapshot(live.Filter{}); s.Counts.Done != 800 || s.Counts.Queued != 0 {
		t.Errorf("counts %+v", s.Counts)
	}
}

// The JSON words of a snapshot, which the status API documents.
func TestSnapshotJSON(t *testing.T) {
	c := newClock()
	tr := newTracker(t, live.DefaultRules(), c)
	tr.Queue("a", 2)
	h := tr.Start(live.Identity{TaskIndex: 3, Repeat: 1, Attempt: 0, RolloutID: "3-1", Agent: "a", EnvironmentServer: "env"})
	c.advance(time.Second)
	b, err := json.Marshal(tr.Snapshot(live.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"time":`, `"start":`, `"elapsed_ms":`, `"ended":false`, `"total":2`, `"skipped":0`,
		`"counts":{"queued":1,"active":1,"slow":0,"retrying":0,"stalled":0,"failed":0,"cancelled":0,"done":0}`,
		`"rate_per_second":`, `"success_rate":`, `"rules":{"slow_factor":3,"stall_factor":10,"slow_floor_ms":10000,"stall_floor_ms":60000}`,
		`"servers":[{"agent":"a","queued":1,"in_flight":1,`, `"series":{"step_seconds":5,"points":[`,
		`"rollouts":[{"task_index":3,"repeat":1,"attempt":0,"rollout_id":"3-1","agent":"a","environment_server":"env","state":"active","stage":"run",`,
		`"truncated":0`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("snapshot JSON lacks %s:\n%s", key, b)
		}
	}
	h.Finish(live.Done, 200, "")
	b, _ = json.Marshal(tr.Snapshot(live.Filter{State: live.Done}))
	if strings.Contains(string(b), `"stage_start"`) || !strings.Contains(string(b), `"end":`) {
		t.Errorf("a finished rollout: %s", b)
	}
}

// BenchmarkTrackerRollout is the tracker's cost of one rollout (Start,
// then Finish) with 64 in flight, against a nil tracker in the same run.
func BenchmarkTrackerRollout(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "nil", true: "on"}[on], func(b *testing.B) {
			var tr *live.Tracker
			if on {
				var err error
				if tr, err = live.NewTracker(live.DefaultRules(), nil); err != nil {
					b.Fatal(err)
				}
			}
			const conc = 64
			ids := make([]live.Identity, 4096)
			for i := range ids {
				ids[i] = ident(i, 0, "simple_agent")
			}
			var ring [conc]*live.Handle
			i := 0
			for b.Loop() {
				slot := i % conc
				ring[slot].Finish(live.Done, 200, "")
				ring[slot] = tr.Start(ids[i%len(ids)])
				i++
			}
		})
	}
}
