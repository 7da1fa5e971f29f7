package live

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Rules decide when a rollout in flight is slow or stalled. Both compare
// a duration with a baseline, the recent p95 of the stage the rollout is
// in: the p95 its agent reports for that stage over the last minute
// (EpisodesReport.Stages), or, for StageRun (an agent that reports no
// stages, or one between two steps), the p95 of the /run calls the
// collector itself saw end over the last minute.
//
//   - stalled: no progress (no step finished, no attempt started) for
//     max(StallFactor × p95, StallFloor);
//   - slow: the current stage has lasted max(SlowFactor × p95, SlowFloor)
//     (a slow rollout still makes progress).
//
// A stage with no step in the window has no baseline; the floor alone
// then stands for the whole product, times the factor: slow after
// SlowFactor × SlowFloor, stalled after StallFactor × StallFloor, so that
// the first minute of a run of long calls is not all flagged.
//
// The state is computed when a snapshot is taken, from the times the
// collector and the agents recorded: nothing runs per rollout between
// snapshots.
type Rules struct {
	// SlowFactor and StallFactor multiply the stage's recent p95; each
	// is at least 1.
	SlowFactor, StallFactor float64
	// SlowFloor and StallFloor are the least a stage must last, or go
	// without progress, to count as slow or stalled; each is positive.
	SlowFloor, StallFloor time.Duration
}

// DefaultRules returns the rules a Tracker uses unless told otherwise:
// SlowFactor 3, StallFactor 10, SlowFloor 10 s, StallFloor 60 s.
//
// They fit a 20 ms model and a 60 s one alike because the factor decides
// for slow models and the floor for fast ones. With a p95 of 20 ms the
// products are 60 ms and 200 ms, far inside the noise of a loaded host
// (a GC pause, a client's retry backoff, a cold connection), so the
// floors decide: a stage is slow after 10 s and a rollout stalled after
// a minute without a step, which no healthy 20 ms call comes near. With
// a p95 of 60 s the floors are below one call and the factors decide: a
// stage is slow after 3 minutes (three times what 95 % of its peers
// took, beyond the tail of an ordinary latency distribution) and a
// rollout stalled after 10 minutes without a step. Stalled is the alarm,
// so its factor is the larger: a false stall costs a user's attention,
// a late one only minutes.
func DefaultRules() Rules {
	return Rules{SlowFactor: 3, StallFactor: 10, SlowFloor: 10 * time.Second, StallFloor: 60 * time.Second}
}

// Validate reports rules a Tracker cannot use: a factor below 1 (or not
// a finite number), a floor of zero or less.
func (r Rules) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"SlowFactor", r.SlowFactor}, {"StallFactor", r.StallFactor}} {
		if !(f.v >= 1) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("live: rules: %s %v: want a finite number of at least 1", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"SlowFloor", r.SlowFloor}, {"StallFloor", r.StallFloor}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("live: rules: %s %v: want a positive duration", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// threshold is max(factor × p95, floor), or factor × floor without a p95.
func threshold(factor float64, floor time.Duration, p95MS float64, known bool) time.Duration {
	if !known {
		return time.Duration(factor * float64(floor))
	}
	return max(time.Duration(factor*p95MS*float64(time.Millisecond)), floor)
}

// Bounds of what a Tracker holds and a Snapshot carries.
const (
	// RingSize is how many of the most recently finished rollouts a
	// Tracker keeps, for each of the final states Done, Failed and
	// Cancelled; older ones are counts only.
	RingSize = 64
	// DefaultLimit is the number of rollouts a Snapshot lists when the
	// Filter names none; MaxLimit the most it lists.
	DefaultLimit = 50
	MaxLimit     = 500
	// SeriesStep is the span of one point of Snapshot.Series at first;
	// past MaxPoints points, neighbours are merged and the span doubles.
	SeriesStep = 5 * time.Second
	MaxPoints  = 720
	// maxStages bounds the stages kept of one agent's report.
	maxStages = 16
)

// Tracker is the live state of one collection run: every rollout by its
// identity and state. Rollouts queued are counts; those in flight (as
// many as the run's concurrency) are held one by one; finished ones are
// counts, plus the RingSize most recent of each final state.
//
// The collector tells it what it does (Queue, Start and the Handle's
// Attempt, Retrying, Finish; End when the run stops), the agents what
// they are doing (Observe), and Snapshot reads it. It is safe for
// concurrent use. Every method of a nil *Tracker does nothing and
// returns the zero value, so a collector without one pays a nil check.
type Tracker struct {
	rules Rules
	now   func() time.Time

	mu      sync.Mutex
	runID   string
	start   time.Time
	end     time.Time // zero while the run lasts
	total   int64
	skipped int64
	queued  int64
	flying  []*Handle          // in flight, in no order (Handle.pos)
	byID    map[string]*Handle // in flight, by current rollout id
	done    int64
	failed  int64
	cancel  int64
	rings   [3]ring // Done, Failed, Cancelled
	servers map[string]*serverState
	// finished is the run's last minute of finished rollouts (their
	// durations), for its rate and success rate; series its whole
	// length, coarsened.
	finished window
	series   series
}

// ring holds the RingSize most recent finished rollouts of one state.
type ring struct {
	items [RingSize]Rollout
	next  int // where the next goes
	n     int
}

func (r *ring) add(ro Rollout) {
	r.items[r.next] = ro
	r.next = (r.next + 1) % RingSize
	r.n = min(r.n+1, RingSize)
}

// each calls f on the rollouts, the most recent first, until it returns
// false.
func (r *ring) each(f func(*Rollout) bool) {
	for i := range r.n {
		if !f(&r.items[(r.next-1-i+2*RingSize)%RingSize]) {
			return
		}
	}
}

// ringOf is the ring of final state s, nil for any other.
func (t *Tracker) ringOf(s State) *ring {
	switch s {
	case Done:
		return &t.rings[0]
	case Failed:
		return &t.rings[1]
	case Cancelled:
		return &t.rings[2]
	}
	return nil
}

// serverState is what a Tracker knows of one agent.
type serverState struct {
	name                  string
	queued                int64
	inFlight              int
	done, failed, cancels int64
	// finished is its last minute of finished rollouts; runs the /run
	// attempts the collector saw end (each attempt, failed or not), the
	// baseline of StageRun.
	finished, runs window
	// reporting: the agent answered EpisodesPath; reportTime is its last
	// report's time (the agent's clock) and stages that report's Stages.
	reporting  bool
	reportTime time.Time
	stages     []StageStats
}

// NewTracker returns the tracker of a run starting at now(), with rules
// (see Rules.Validate). now is the clock of every time it records (time.Now
// in production; a fake one in tests).
func NewTracker(rules Rules, now func() time.Time) (*Tracker, error) {
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	t := &Tracker{rules: rules, now: now, byID: map[string]*Handle{}, servers: map[string]*serverState{}}
	t.start = now()
	t.series.step = SeriesStep
	return t, nil
}

// Rules returns the tracker's rules.
func (t *Tracker) Rules() Rules {
	if t == nil {
		return Rules{}
	}
	return t.rules
}

// SetRunID names the run (Snapshot.RunID), such as its run directory's
// id; "" leaves it unnamed.
func (t *Tracker) SetRunID(id string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.runID = id
	t.mu.Unlock()
}

// server returns the state of agent, made on first use. t.mu is held.
func (t *Tracker) server(agent string) *serverState {
	s := t.servers[agent]
	if s == nil {
		s = &serverState{name: agent}
		t.servers[agent] = s
	}
	return s
}

// Queue counts n more rollouts of agent waiting to start.
func (t *Tracker) Queue(agent string, n int) {
	if t == nil || n <= 0 {
		return
	}
	t.mu.Lock()
	t.server(agent).queued += int64(n)
	t.queued += int64(n)
	t.total += int64(n)
	t.mu.Unlock()
}

// Skip counts n rollouts of the run an earlier run completed (a resume):
// part of Snapshot.Total, in no state.
func (t *Tracker) Skip(n int) {
	if t == nil || n <= 0 {
		return
	}
	t.mu.Lock()
	t.skipped += int64(n)
	t.total += int64(n)
	t.mu.Unlock()
}

// End records that the run stopped: the rollouts still queued will not
// run and count as Cancelled, and the run's elapsed time stops. Rollouts
// still in flight are left as they are (the collector finishes each).
// A second call does nothing.
func (t *Tracker) End() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.end.IsZero() {
		return
	}
	t.end = t.now()
	for _, s := range t.servers {
		s.cancels += s.queued
		s.queued = 0
	}
	t.cancel += t.queued
	t.queued = 0
}

// Identity names a rollout: where it is in the dataset, which attempt it
// is at, the id the agent knows it by, and where it runs.
type Identity struct {
	// TaskIndex and Repeat are the row's _ng_task_index and
	// _ng_rollout_index; Attempt its _ng_attempt_index (0 for the first
	// call).
	TaskIndex int `json:"task_index"`
	Repeat    int `json:"repeat"`
	Attempt   int `json:"attempt"`
	// RolloutID is the id of the current attempt, as its agent receives
	// it in the row and reports it (Episode.RolloutID): the row's
	// explicit _ng_rollout_id, else "<task index>-<repeat>", with
	// "-a<attempt>" for attempt 1 and later.
	RolloutID string `json:"rollout_id"`
	// Agent is the agent that runs it (the row's agent_ref.name);
	// EnvironmentServer the environment server it was sent through, ""
	// when it was sent straight to the agent.
	Agent             string `json:"agent"`
	EnvironmentServer string `json:"environment_server,omitempty"`
	// TraceID is its trace, when tracing is on and it is known: as the
	// agent reports it while the attempt runs, as the collector learned
	// it once an attempt ended.
	TraceID string `json:"trace_id,omitempty"`
}

// Rollout is one rollout as a Snapshot shows it. It names no prompt, no
// answer and no message: stages, times, a status code and an error
// class only.
type Rollout struct {
	Identity
	// State is its state when the snapshot was taken.
	State State `json:"state"`
	// Stage and Turn are what it waits on (in flight only): its agent's
	// word, else StageRun; StageStart since when, StageElapsedMS how long
	// that is.
	Stage          Stage     `json:"stage,omitempty"`
	Turn           int       `json:"turn,omitempty"`
	StageStart     time.Time `json:"stage_start,omitzero"`
	StageElapsedMS float64   `json:"stage_elapsed_ms,omitzero"`
	// Start is when its first attempt started; ElapsedMS how long it has
	// run (until End for a finished one).
	Start     time.Time `json:"start"`
	ElapsedMS float64   `json:"elapsed_ms"`
	// LastProgress is when a step last finished or an attempt started
	// (in flight only); SinceProgressMS how long ago that is.
	LastProgress    time.Time `json:"last_progress,omitzero"`
	SinceProgressMS float64   `json:"since_progress_ms,omitzero"`
	// End is when it finished (final states only).
	End time.Time `json:"end,omitzero"`
	// Steps are its agent's most recent finished steps of the current
	// (or last) attempt, oldest first, at most MaxSteps.
	Steps []Step `json:"steps,omitempty"`
	// ErrorClass is the kind of the last failed attempt (such as
	// TimeoutError, ClientResponseError, or _ng_failure_class for an
	// agent that answered a failure); Status the HTTP status of the last
	// answer (0 when none came).
	ErrorClass string `json:"error_class,omitempty"`
	Status     int    `json:"status,omitempty"`
}

// Handle is a rollout in flight in a Tracker, through which the
// collector running it reports its attempts. Its methods are safe for
// concurrent use with the Tracker's; every method of a nil *Handle does
// nothing.
type Handle struct {
	t   *Tracker
	srv *serverState
	pos int // index in t.flying; -1 once finished
	id  Identity

	start, attemptStart time.Time
	retried             bool // an attempt failed
	errClass            string
	status              int

	// What the agent last reported of the current attempt, on the
	// collector's clock: observed is false before the first report.
	observed     bool
	reporter     *serverState
	stage        Stage
	turn         int
	stageStart   time.Time
	lastProgress time.Time
	steps        []Step
}

// Start records that the rollout id starts its first attempt (id.Attempt)
// now, taking it off its agent's queue, and returns its handle.
func (t *Tracker) Start(id Identity) *Handle {
	if t == nil {
		return nil
	}
	now := t.now()
	h := &Handle{t: t, id: id, start: now, attemptStart: now}
	t.mu.Lock()
	h.srv = t.server(id.Agent)
	if h.srv.queued > 0 {
		h.srv.queued--
		t.queued--
	} else {
		t.total++ // started without being queued
	}
	h.srv.inFlight++
	h.pos = len(t.flying)
	t.flying = append(t.flying, h)
	t.byID[id.RolloutID] = h
	t.mu.Unlock()
	return h
}

// Attempt records that attempt n of the rollout starts now, under
// rolloutID (the id of that attempt's row). It is progress.
func (h *Handle) Attempt(n int, rolloutID string) {
	if h == nil {
		return
	}
	t := h.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.pos < 0 {
		return
	}
	if t.byID[h.id.RolloutID] == h {
		delete(t.byID, h.id.RolloutID)
	}
	h.id.Attempt, h.id.RolloutID = n, rolloutID
	t.byID[rolloutID] = h
	h.attemptStart = now
	h.observed, h.reporter, h.steps = false, nil, h.steps[:0]
}

// Retrying records that the current attempt failed now, with class (the
// kind of failure; never message text) and status (the answer's HTTP
// status, 0 when none came), and that another follows: the rollout is
// Retrying from now on, unless it stalls.
func (h *Handle) Retrying(class string, status int) {
	if h == nil {
		return
	}
	t := h.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.pos < 0 {
		return
	}
	h.retried, h.errClass, h.status = true, class, status
	h.srv.runs.add(now.Unix(), msSince(h.attemptStart, now), true)
}

// SetTraceID records the rollout's trace id ("" changes nothing).
func (h *Handle) SetTraceID(id string) {
	if h == nil || id == "" {
		return
	}
	h.t.mu.Lock()
	h.id.TraceID = id
	h.t.mu.Unlock()
}

// Finish records that the rollout ended now in state (Done, Failed or
// Cancelled; any other counts as Failed), with the last answer's status
// and, for a failure, its class. A Done or Failed rollout's last attempt
// joins its agent's /run window (a Cancelled one was cut short and
// says nothing of the agent). A second call does nothing.
func (h *Handle) Finish(state State, status int, class string) {
	if h == nil {
		return
	}
	switch state {
	case Done, Failed, Cancelled:
	default:
		state = Failed
	}
	t := h.t
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.pos < 0 {
		return
	}
	last := t.flying[len(t.flying)-1]
	t.flying[h.pos], last.pos = last, h.pos
	t.flying = t.flying[:len(t.flying)-1]
	h.pos = -1
	if t.byID[h.id.RolloutID] == h {
		delete(t.byID, h.id.RolloutID)
	}
	s := h.srv
	s.inFlight--
	sec, ms := now.Unix(), msSince(h.start, now)
	switch state {
	case Done:
		t.done++
		s.done++
	case Failed:
		t.failed++
		s.failed++
	case Cancelled:
		t.cancel++
		s.cancels++
	}
	if state != Cancelled {
		s.runs.add(sec, msSince(h.attemptStart, now), state == Failed && (status == 0 || status >= 400))
		s.finished.add(sec, ms, state == Failed)
		t.finished.add(sec, ms, state == Failed)
		t.series.add(t.start, now, state == Failed)
	}
	h.status = status
	if class != "" {
		h.errClass = class
	}
	ro := Rollout{Identity: h.id, State: state, Start: h.start.UTC(), ElapsedMS: ms, End: now.UTC(),
		ErrorClass: h.errClass, Status: h.status}
	if len(h.steps) > 0 {
		ro.Steps = h.steps // the handle is done with them
		h.steps = nil
	}
	t.ringOf(state).add(ro)
}

// msSince is the milliseconds from a to b, 0 when b is before a.
func msSince(a, b time.Time) float64 {
	return float64(max(b.Sub(a), 0)) / float64(time.Millisecond)
}

// Observe merges what agent reported on EpisodesPath into the rollouts in
// flight, matched by rollout id (an episode of no rollout in flight is
// ignored), and keeps the report's Stages as the agent's last minute.
// Its times are the agent's clock: each is taken as an age at
// report.Time and placed on the tracker's clock by the time the report
// is observed, so a skew between the hosts does not move them.
func (t *Tracker) Observe(agent string, report EpisodesReport) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.server(agent)
	s.reporting, s.reportTime = true, report.Time
	s.stages = append(s.stages[:0], report.Stages[:min(len(report.Stages), maxStages)]...)
	for i := range report.Episodes {
		ep := &report.Episodes[i]
		h := t.byID[ep.RolloutID]
		if h == nil {
			continue
		}
		h.observed, h.reporter = true, s
		h.stage, h.turn = cmpOr(ep.Stage, StageRun), ep.Turn
		h.stageStart = now.Add(-max(report.Time.Sub(ep.StageStart), 0))
		h.lastProgress = now.Add(-max(report.Time.Sub(ep.LastProgress), 0))
		if h.lastProgress.Before(h.attemptStart) {
			h.lastProgress = h.attemptStart // the attempt's start is progress too
		}
		steps := ep.Steps[max(0, len(ep.Steps)-MaxSteps):]
		h.steps = append(h.steps[:0], steps...)
		if ep.TraceID != "" {
			h.id.TraceID = ep.TraceID
		}
	}
}

func cmpOr(s, alt Stage) Stage {
	if s == "" {
		return alt
	}
	return s
}
