package live

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Filter selects the rollouts a Snapshot lists. The zero value lists the
// rollouts in flight, stalled first, then slow, retrying and active,
// each kind the longest without progress first, at most DefaultLimit.
type Filter struct {
	// State, when set, lists only the rollouts in that state: those in
	// flight for Active, Slow, Retrying and Stalled, the most recent
	// finished ones (at most RingSize, newest first) for Done, Failed
	// and Cancelled; Queued lists none (queued rollouts are counts).
	State State
	// RolloutID, when set, lists the one rollout whose current (or last)
	// attempt has that id, in flight or among the recent finished ones;
	// none when it is neither. State is then ignored.
	RolloutID string
	// Limit bounds the list: 0 means DefaultLimit; more than MaxLimit
	// means MaxLimit.
	Limit int
}

// Validate reports a State that is not one of the states.
func (f Filter) Validate() error {
	switch f.State {
	case "", Queued, Active, Slow, Retrying, Stalled, Failed, Cancelled, Done:
		return nil
	}
	return fmt.Errorf("live: state %q: want one of queued, active, slow, retrying, stalled, failed, cancelled, done", f.State)
}

// Counts are the run's rollouts by state.
type Counts struct {
	Queued    int64 `json:"queued"`
	Active    int64 `json:"active"`
	Slow      int64 `json:"slow"`
	Retrying  int64 `json:"retrying"`
	Stalled   int64 `json:"stalled"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	Done      int64 `json:"done"`
}

// inc counts one rollout in flight in state s.
func (c *Counts) inc(s State) {
	switch s {
	case Active:
		c.Active++
	case Slow:
		c.Slow++
	case Retrying:
		c.Retrying++
	case Stalled:
		c.Stalled++
	}
}

// ServerStats is one agent as a Snapshot shows it: its rollouts by
// state, its last minute as the collector saw it and, when the agent
// reports them, its stages' last minute as it saw them.
type ServerStats struct {
	// Agent is the agent's name (the rows' agent_ref.name).
	Agent string `json:"agent"`
	// Queued, InFlight, Done, Failed and Cancelled count its rollouts;
	// Slow, Retrying and Stalled are those of InFlight in that state.
	Queued    int64 `json:"queued"`
	InFlight  int   `json:"in_flight"`
	Slow      int   `json:"slow"`
	Retrying  int   `json:"retrying"`
	Stalled   int   `json:"stalled"`
	Done      int64 `json:"done"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	// RatePerSecond is its rollouts finished (done or failed) per second
	// over the last minute (over the run's elapsed time in its first
	// minute); SuccessRate the share of them done, 0 with none.
	RatePerSecond float64 `json:"rate_per_second"`
	SuccessRate   float64 `json:"success_rate"`
	// Run is its /run attempts that ended in the last minute as the
	// collector timed them (a failed attempt is one with no answer or a
	// status of 400 or more): the baseline of StageRun.
	Run StageStats `json:"run"`
	// Reporting says the agent answers EpisodesPath; ReportTime is its
	// last report's time (the agent's clock) and Stages that report's
	// last minute per stage.
	Reporting  bool         `json:"reporting"`
	ReportTime time.Time    `json:"report_time,omitzero"`
	Stages     []StageStats `json:"stages,omitempty"`
}

// Point is one interval of Snapshot.Series.
type Point struct {
	// Time is the interval's start.
	Time time.Time `json:"time"`
	// Done and Failed count the rollouts that finished in it.
	Done   int64 `json:"done"`
	Failed int64 `json:"failed"`
	// RatePerSecond is Done+Failed over the interval's length (its
	// elapsed part, for the last); SuccessRate Done over Done+Failed, 0
	// with neither.
	RatePerSecond float64 `json:"rate_per_second"`
	SuccessRate   float64 `json:"success_rate"`
}

// Series is the run's throughput and success over its whole length, for
// a chart: one point per StepSeconds from the run's start, at most
// MaxPoints (the step doubles, neighbours merged, when the run outgrows
// them).
type Series struct {
	StepSeconds float64 `json:"step_seconds"`
	Points      []Point `json:"points"`
}

// SnapshotRules are the Rules a snapshot's states were decided by.
type SnapshotRules struct {
	SlowFactor   float64 `json:"slow_factor"`
	StallFactor  float64 `json:"stall_factor"`
	SlowFloorMS  float64 `json:"slow_floor_ms"`
	StallFloorMS float64 `json:"stall_floor_ms"`
}

// Snapshot is a run as it was at Time: the JSON the status API answers
// and `gymlens top --once --json` prints. Its size is bounded whatever
// the run's length (the rollouts listed by Filter.Limit, the series by
// MaxPoints, the servers by the fleet's agents), and it holds no prompt,
// answer, message, header or credential.
type Snapshot struct {
	// Time is when it was taken; RunID names the run ("" when unnamed).
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id,omitempty"`
	// Start is when the run started, ElapsedMS how long it has run (until
	// it ended: Ended).
	Start     time.Time `json:"start"`
	ElapsedMS float64   `json:"elapsed_ms"`
	Ended     bool      `json:"ended"`
	// Total is the run's rollouts: Skipped ones (completed by an earlier
	// run) and those of Counts.
	Total   int64  `json:"total"`
	Skipped int64  `json:"skipped"`
	Counts  Counts `json:"counts"`
	// RatePerSecond and SuccessRate are the run's over the last minute,
	// as in ServerStats.
	RatePerSecond float64 `json:"rate_per_second"`
	SuccessRate   float64 `json:"success_rate"`
	// Rules decided Slow and Stalled.
	Rules SnapshotRules `json:"rules"`
	// Servers are the agents, by name.
	Servers []ServerStats `json:"servers"`
	// Series is the run's rate and success over time.
	Series Series `json:"series"`
	// Rollouts are those the Filter selected, in its order; Truncated
	// counts those it selected beyond its limit.
	Rollouts  []Rollout `json:"rollouts"`
	Truncated int       `json:"truncated"`
}

// series counts the finished rollouts of a run per interval of step,
// from the run's start: point i covers [start+i·step, start+(i+1)·step).
type series struct {
	step         time.Duration
	done, failed []int64
}

// reach makes the series cover the interval of t, coarsening it first
// while that interval is past MaxPoints, and returns its index (-1 for a
// time before start).
func (s *series) reach(start, t time.Time) int {
	if t.Before(start) {
		return -1
	}
	i := int(t.Sub(start) / s.step)
	for i >= MaxPoints {
		s.coarsen()
		i = int(t.Sub(start) / s.step)
	}
	for len(s.done) <= i {
		s.done, s.failed = append(s.done, 0), append(s.failed, 0)
	}
	return i
}

// coarsen merges neighbouring points, doubling the step.
func (s *series) coarsen() {
	n := (len(s.done) + 1) / 2
	for i := range n {
		d, f := s.done[2*i], s.failed[2*i]
		if 2*i+1 < len(s.done) {
			d, f = d+s.done[2*i+1], f+s.failed[2*i+1]
		}
		s.done[i], s.failed[i] = d, f
	}
	s.done, s.failed = s.done[:n], s.failed[:n]
	s.step *= 2
}

// add counts a rollout that finished at t.
func (s *series) add(start, t time.Time, failed bool) {
	i := s.reach(start, t)
	if i < 0 {
		return
	}
	if failed {
		s.failed[i]++
	} else {
		s.done[i]++
	}
}

// rate is n per second over d, 0 when d is not positive.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// share is part over whole, 0 when whole is 0.
func share(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// minuteRate is the rate and success rate of a window of finished
// rollouts at now, over the last minute, or over the run's elapsed time
// while that is shorter.
func minuteRate(w *window, now time.Time, elapsed time.Duration) (perSecond, success float64) {
	st := w.stats(StageRun, now.Unix())
	span := min(time.Duration(WindowSeconds)*time.Second, elapsed)
	// The window holds whole seconds: a span under one second reads as
	// one, so a first second's finishes are not a rate of thousands.
	span = max(span, time.Second)
	return rate(st.Count, span), st.SuccessRate
}

// baselines are the recent p95s a snapshot judges by, the /run windows
// read once per agent.
type baselines struct {
	now int64
	run map[*serverState]StageStats
}

// p95 is the recent p95 of stage: as reporter (the agent that reported
// the rollout's episode) saw it, else, for StageRun or a rollout no agent
// reported, the /run window the collector keeps of srv. known is false
// when the stats have no step (a stage the agent did not report has
// none).
func (b *baselines) p95(reporter, srv *serverState, stage Stage) (float64, bool) {
	if reporter != nil && stage != StageRun {
		for _, st := range reporter.stages {
			if st.Stage == stage {
				return st.P95MS, st.Count > 0
			}
		}
		return 0, false
	}
	st, ok := b.run[srv]
	if !ok {
		st = srv.runs.stats(StageRun, b.now)
		b.run[srv] = st
	}
	return st.P95MS, st.Count > 0
}

// view is a rollout in flight as a snapshot sees it.
type view struct {
	h        *Handle
	state    State
	since    time.Duration // without progress
	stageAge time.Duration
}

// Snapshot returns the run as it is now, with the rollouts f selects
// (an invalid f.State selects none).
func (t *Tracker) Snapshot(f Filter) Snapshot {
	if t == nil {
		return Snapshot{Servers: []ServerStats{}, Rollouts: []Rollout{}, Series: Series{Points: []Point{}}}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)

	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	end := now
	if !t.end.IsZero() {
		end = t.end
	}
	elapsed := max(end.Sub(t.start), 0)
	snap := Snapshot{
		Time: now.UTC(), RunID: t.runID, Start: t.start.UTC(), ElapsedMS: float64(elapsed) / float64(time.Millisecond),
		Ended: !t.end.IsZero(), Total: t.total, Skipped: t.skipped,
		Counts: Counts{Queued: t.queued, Done: t.done, Failed: t.failed, Cancelled: t.cancel},
		Rules: SnapshotRules{SlowFactor: t.rules.SlowFactor, StallFactor: t.rules.StallFactor,
			SlowFloorMS:  float64(t.rules.SlowFloor) / float64(time.Millisecond),
			StallFloorMS: float64(t.rules.StallFloor) / float64(time.Millisecond)},
		Rollouts: []Rollout{},
	}
	snap.RatePerSecond, snap.SuccessRate = minuteRate(&t.finished, now, elapsed)

	// Every rollout in flight gets its state, for the counts.
	b := baselines{now: now.Unix(), run: map[*serverState]StageStats{}}
	views := make([]view, len(t.flying))
	perServer := map[*serverState]*ServerStats{}
	snap.Servers = make([]ServerStats, 0, len(t.servers))
	for _, s := range t.servers {
		st := ServerStats{Agent: s.name, Queued: s.queued, InFlight: s.inFlight, Done: s.done, Failed: s.failed,
			Cancelled: s.cancels, Reporting: s.reporting, ReportTime: s.reportTime.UTC(), Stages: slices.Clone(s.stages)}
		st.RatePerSecond, st.SuccessRate = minuteRate(&s.finished, now, elapsed)
		snap.Servers = append(snap.Servers, st)
	}
	slices.SortFunc(snap.Servers, func(a, b ServerStats) int { return cmp.Compare(a.Agent, b.Agent) })
	for i := range snap.Servers {
		s := t.servers[snap.Servers[i].Agent]
		perServer[s] = &snap.Servers[i]
	}
	for i, h := range t.flying {
		v := t.judge(h, now, &b)
		views[i] = v
		snap.Counts.inc(v.state)
		st := perServer[h.srv]
		switch v.state {
		case Slow:
			st.Slow++
		case Retrying:
			st.Retrying++
		case Stalled:
			st.Stalled++
		}
	}
	for s, st := range perServer {
		if run, ok := b.run[s]; ok {
			st.Run = run
		} else {
			st.Run = s.runs.stats(StageRun, b.now)
		}
	}
	snap.Series = t.seriesAt(now)

	switch {
	case f.RolloutID != "":
		if h := t.byID[f.RolloutID]; h != nil {
			snap.Rollouts = append(snap.Rollouts, t.show(views[h.pos], now))
			break
		}
		for i := range t.rings {
			found := false
			t.rings[i].each(func(r *Rollout) bool {
				if r.RolloutID == f.RolloutID {
					snap.Rollouts, found = append(snap.Rollouts, clone(r)), true
				}
				return !found
			})
			if found {
				break
			}
		}
	case f.State == Done || f.State == Failed || f.State == Cancelled:
		r := t.ringOf(f.State)
		r.each(func(ro *Rollout) bool {
			if len(snap.Rollouts) == limit {
				return false
			}
			snap.Rollouts = append(snap.Rollouts, clone(ro))
			return true
		})
		snap.Truncated = r.n - len(snap.Rollouts)
	case f.State == "" || f.State == Active || f.State == Slow || f.State == Retrying || f.State == Stalled:
		sel := views[:0:0]
		for _, v := range views {
			if f.State == "" || v.state == f.State {
				sel = append(sel, v)
			}
		}
		slices.SortFunc(sel, func(a, b view) int {
			if c := cmp.Compare(rank(a.state), rank(b.state)); c != 0 {
				return c
			}
			if c := cmp.Compare(b.since, a.since); c != 0 {
				return c
			}
			return cmp.Compare(b.stageAge, a.stageAge)
		})
		for _, v := range sel[:min(limit, len(sel))] {
			snap.Rollouts = append(snap.Rollouts, t.show(v, now))
		}
		snap.Truncated = max(len(sel)-limit, 0)
	}
	return snap
}

// rank orders the states of rollouts in flight for a snapshot: the ones
// needing attention first.
func rank(s State) int {
	switch s {
	case Stalled:
		return 0
	case Slow:
		return 1
	case Retrying:
		return 2
	}
	return 3
}

// judge decides the state of a rollout in flight at now (see Rules).
// t.mu is held.
func (t *Tracker) judge(h *Handle, now time.Time, b *baselines) view {
	stage, stageStart, progress := StageRun, h.attemptStart, h.attemptStart
	var reporter *serverState
	if h.observed {
		stage, stageStart, progress, reporter = h.stage, h.stageStart, h.lastProgress, h.reporter
	}
	v := view{h: h, since: max(now.Sub(progress), 0), stageAge: max(now.Sub(stageStart), 0)}
	p95, known := b.p95(reporter, h.srv, stage)
	switch {
	case v.since >= threshold(t.rules.StallFactor, t.rules.StallFloor, p95, known):
		v.state = Stalled
	case h.retried:
		v.state = Retrying
	case v.stageAge >= threshold(t.rules.SlowFactor, t.rules.SlowFloor, p95, known):
		v.state = Slow
	default:
		v.state = Active
	}
	return v
}

// show is the Rollout of a rollout in flight. t.mu is held.
func (t *Tracker) show(v view, now time.Time) Rollout {
	h := v.h
	ro := Rollout{Identity: h.id, State: v.state, Stage: StageRun, Start: h.start.UTC(),
		ElapsedMS:      msSince(h.start, now),
		StageStart:     now.Add(-v.stageAge).UTC(),
		StageElapsedMS: float64(v.stageAge) / float64(time.Millisecond),
		LastProgress:   now.Add(-v.since).UTC(), SinceProgressMS: float64(v.since) / float64(time.Millisecond),
		ErrorClass: h.errClass, Status: h.status}
	if h.observed {
		ro.Stage, ro.Turn = h.stage, h.turn
		ro.Steps = slices.Clone(h.steps)
	}
	return ro
}

// clone copies a finished rollout for a snapshot.
func clone(r *Rollout) Rollout {
	out := *r
	out.Steps = slices.Clone(r.Steps)
	return out
}

// seriesAt is the run's series at now, its last point the interval now
// falls in. t.mu is held.
func (t *Tracker) seriesAt(now time.Time) Series {
	end := now
	if !t.end.IsZero() {
		end = t.end
	}
	t.series.reach(t.start, end)
	s := &t.series
	out := Series{StepSeconds: s.step.Seconds(), Points: make([]Point, len(s.done))}
	for i := range out.Points {
		from := t.start.Add(time.Duration(i) * s.step)
		span := min(s.step, end.Sub(from))
		d, f := s.done[i], s.failed[i]
		out.Points[i] = Point{Time: from.UTC(), Done: d, Failed: f, RatePerSecond: rate(d+f, max(span, time.Second)),
			SuccessRate: share(d, d+f)}
	}
	return out
}
