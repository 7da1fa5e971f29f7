package live

import (
	"math"
	"slices"
	"sync"
	"time"
)

// WindowSeconds is the span of an EpisodesReport's Stages: the last
// minute, kept as one bucket per second.
const WindowSeconds = 60

// numStages is how many stages have a window: those of agentStages.
const numStages = 4

// agentStages are the stages an agent's steps report, each with a window,
// in the order EpisodesReport.Stages lists them.
func agentStages() [numStages]Stage {
	return [numStages]Stage{StageSeed, StageModel, StageTool, StageVerify}
}

// stageIndex is the window of stage s, or -1 for a stage without one
// (StageRun, or a word this package does not know).
func stageIndex(s Stage) int {
	for i, st := range agentStages() {
		if st == s {
			return i
		}
	}
	return -1
}

// The latency histogram of one second of one stage: bin 0 holds steps
// shorter than histMinMS; bin i >= 1 holds [histMinMS·r^(i-1),
// histMinMS·r^i) with r = histRatio, the last bin everything longer. A
// percentile is read as its bin's geometric middle, histMinMS·r^(i-1/2),
// so it is within sqrt(1.1)-1 < 4.9 % of a step's true duration between
// 10 µs and about an hour (below, it reads 10 µs; above, the last bin's
// middle).
const (
	histMinMS = 0.01
	histRatio = 1.1
	histBins  = 209 // 1 + ceil(ln(1 h / 10 µs) / ln 1.1) + 1
	// histScale is 1/ln(histRatio), the bins per natural-log unit.
	histScale = 10.492058687257062
)

// histBin is the bin of a step that took ms milliseconds.
func histBin(ms float64) int {
	if !(ms >= histMinMS) { // NaN too
		return 0
	}
	i := 1 + int(math.Log(ms/histMinMS)*histScale)
	if i >= histBins {
		return histBins - 1
	}
	return i
}

// binValueMS is the duration a percentile falling in bin i reads as.
func binValueMS(i int) float64 {
	if i == 0 {
		return histMinMS
	}
	return histMinMS * math.Pow(histRatio, float64(i)-0.5)
}

// second is one second of one stage's window.
type second struct {
	unix          int64 // the second it holds (Unix time); 0 before first use
	count, failed int64
	bins          [histBins]uint32
}

// window is one stage's last minute: WindowSeconds seconds, the one of
// Unix second s at s mod WindowSeconds, reused as time moves on.
type window struct {
	mu   sync.Mutex
	secs [WindowSeconds]second
}

// add counts one step that ended at unix second sec.
func (w *window) add(sec int64, ms float64, failed bool) {
	bin := histBin(ms)
	slot := sec % WindowSeconds
	if slot < 0 { // a clock before 1970
		slot += WindowSeconds
	}
	w.mu.Lock()
	b := &w.secs[slot]
	if b.unix < sec {
		*b = second{unix: sec}
	}
	b.count++
	if failed {
		b.failed++
	}
	b.bins[bin]++
	w.mu.Unlock()
}

// stats sums the seconds in (now-WindowSeconds, now] into stage's stats.
func (w *window) stats(stage Stage, now int64) StageStats {
	out := StageStats{Stage: stage}
	var bins [histBins]uint64
	w.mu.Lock()
	for i := range w.secs {
		b := &w.secs[i]
		if b.count == 0 || b.unix <= now-WindowSeconds || b.unix > now {
			continue
		}
		out.Count += b.count
		out.Failed += b.failed
		for j, n := range b.bins {
			bins[j] += uint64(n)
		}
	}
	w.mu.Unlock()
	if out.Count == 0 {
		return out
	}
	out.SuccessRate = float64(out.Count-out.Failed) / float64(out.Count)
	out.P50MS = percentile(&bins, out.Count, 0.50)
	out.P95MS = percentile(&bins, out.Count, 0.95)
	out.P99MS = percentile(&bins, out.Count, 0.99)
	return out
}

// percentile is the q-quantile of count steps binned in bins: the value
// of the bin holding the ceil(q·count)-th shortest.
func percentile(bins *[histBins]uint64, count int64, q float64) float64 {
	rank := uint64(math.Ceil(q * float64(count)))
	rank = max(rank, 1)
	var seen uint64
	for i, n := range bins {
		seen += n
		if seen >= rank {
			return binValueMS(i)
		}
	}
	return binValueMS(histBins - 1)
}

// Episodes is the registry of an agent server's episodes: those in
// flight, for EpisodesReport.Episodes, and every finished step of the
// last minute, per stage, for EpisodesReport.Stages. Each agent server
// has its own. It is safe for concurrent use; the zero value is ready,
// and a nil *Episodes records nothing.
//
// Its memory is bounded whatever the run's length: a fixed window per
// stage (WindowSeconds seconds, each a histogram of histBins counts,
// about 50 KiB a stage), and per episode in flight a fixed ring of
// MaxSteps steps, given back when the episode ends. A step (Enter, then
// Leave) allocates nothing and takes three uncontended locks.
type Episodes struct {
	mu       sync.Mutex
	first    *EpisodeHandle // the episodes in flight, a doubly linked list
	inFlight int
	stages   [numStages]window
}

// EpisodeHandle is one episode of an Episodes: its steps are recorded
// through it by the goroutine running the episode (Enter, Leave, End,
// one at a time), while Report reads it. A nil handle records nothing.
type EpisodeHandle struct {
	owner      *Episodes
	start      time.Time // ep.Start, read without mu
	listed     bool      // an episode with a rollout id, in owner's list (owner.mu)
	prev, next *EpisodeHandle

	mu         sync.Mutex
	ep         Episode // Steps unused: the ring holds them
	open       bool    // a step is open (Enter without its Leave)
	stage      int     // stageIndex of the open step's stage
	ring       [MaxSteps]Step
	head, size int // the oldest step's index in ring, and how many
}

// Begin records the start of an episode at now and returns its handle.
// An episode without a rolloutID is not reported (Report names episodes
// by their id) but its steps count in the stages' window. The episode
// starts at StageRun, the agent's own work, until its first Enter.
func (e *Episodes) Begin(rolloutID string, now time.Time) *EpisodeHandle {
	if e == nil {
		return nil
	}
	h := &EpisodeHandle{owner: e, start: now, listed: rolloutID != ""}
	h.ep = Episode{RolloutID: rolloutID, Stage: StageRun, StageStart: now, Start: now, LastProgress: now}
	if h.listed {
		e.mu.Lock()
		h.next = e.first
		if e.first != nil {
			e.first.prev = h
		}
		e.first = h
		e.inFlight++
		e.mu.Unlock()
	}
	return h
}

// Enter records that the episode starts waiting on stage at now, in agent
// turn turn (1-based; 0 for a step outside the turn loop). A step still
// open is replaced without being counted.
func (h *EpisodeHandle) Enter(stage Stage, turn int, now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.ep.Stage, h.ep.Turn, h.ep.StageStart = stage, turn, now
	h.open, h.stage = true, stageIndex(stage)
	h.mu.Unlock()
}

// Leave finishes the step Enter opened, at now: it joins the episode's
// recent steps (the oldest dropped past MaxSteps), becomes its last
// progress, and counts in its stage's window, failed when failed is set
// or status is 0 (no answer) or 400 or more. The episode is back at
// StageRun until the next Enter. Without an open step it does nothing.
func (h *EpisodeHandle) Leave(status int, failed bool, now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if !h.open {
		h.mu.Unlock()
		return
	}
	idx := h.stage
	d := max(now.Sub(h.ep.StageStart), 0)
	ms := float64(d) / float64(time.Millisecond)
	st := Step{Stage: h.ep.Stage, Turn: h.ep.Turn, Start: h.ep.StageStart, DurationMS: ms, Status: status}
	if h.size < MaxSteps {
		h.ring[(h.head+h.size)%MaxSteps] = st
		h.size++
	} else {
		h.ring[h.head] = st
		h.head = (h.head + 1) % MaxSteps
	}
	h.ep.Stage, h.ep.StageStart, h.ep.LastProgress = StageRun, now, now
	h.open = false
	h.mu.Unlock()
	if idx >= 0 {
		h.owner.stages[idx].add(now.Unix(), ms, failed || status == 0 || status >= 400)
	}
}

// End records that the episode is over: it is no longer in flight. A
// step still open is not counted. Calling End again does nothing.
func (h *EpisodeHandle) End() {
	if h == nil {
		return
	}
	e := h.owner
	e.mu.Lock()
	if h.listed {
		if h.prev != nil {
			h.prev.next = h.next
		} else {
			e.first = h.next
		}
		if h.next != nil {
			h.next.prev = h.prev
		}
		h.prev, h.next, h.listed = nil, nil, false
		e.inFlight--
	}
	e.mu.Unlock()
}

// snapshot copies the episode as Report shows it, times in UTC.
func (h *EpisodeHandle) snapshot() Episode {
	h.mu.Lock()
	ep := h.ep
	var steps []Step
	if h.size > 0 {
		steps = make([]Step, h.size)
		for i := range steps {
			steps[i] = h.ring[(h.head+i)%MaxSteps]
			steps[i].Start = steps[i].Start.UTC()
		}
	}
	h.mu.Unlock()
	ep.Steps = steps
	ep.StageStart, ep.Start, ep.LastProgress = ep.StageStart.UTC(), ep.Start.UTC(), ep.LastProgress.UTC()
	return ep
}

// Report is what the agent server called server answers on EpisodesPath
// at now: the episodes in flight with a rollout id, the longest-running
// first, at most MaxEpisodes of them (Truncated counts the rest), and the
// last WindowSeconds seconds of every agent stage (seed_session,
// model_call, tool_call, verify, in that order, each listed even without
// a step). Latency percentiles are read from log-spaced bins, within 5 %
// of the true durations between 10 µs and an hour. A nil *Episodes
// reports none of either.
func (e *Episodes) Report(server string, now time.Time) EpisodesReport {
	out := EpisodesReport{Server: server, Time: now.UTC(), WindowSeconds: WindowSeconds,
		Episodes: []Episode{}, Stages: make([]StageStats, 0, numStages)}
	if e == nil {
		return out
	}
	// The handles in flight, with the start each began at: their order
	// is decided before any is copied, so that past MaxEpisodes only the
	// ones shown are.
	type started struct {
		start time.Time
		h     *EpisodeHandle
	}
	e.mu.Lock()
	list := make([]started, 0, e.inFlight)
	for h := e.first; h != nil; h = h.next {
		list = append(list, started{h.start, h})
	}
	e.mu.Unlock()
	slices.SortStableFunc(list, func(a, b started) int { return a.start.Compare(b.start) })
	if len(list) > MaxEpisodes {
		out.Truncated = len(list) - MaxEpisodes
		list = list[:MaxEpisodes]
	}
	out.Episodes = make([]Episode, len(list))
	for i, s := range list {
		out.Episodes[i] = s.h.snapshot()
	}
	sec := now.Unix()
	for i, st := range agentStages() {
		out.Stages = append(out.Stages, e.stages[i].stats(st, sec))
	}
	return out
}
