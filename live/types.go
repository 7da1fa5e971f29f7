package live

import (
	"time"

	"github.com/gymlens/gymlens/contract"
)

// State is where a rollout is, one of the constants below. It is the word
// the status API and `gymlens top --once --json` carry.
type State string

// The states of a rollout. Queued, Active, Slow, Retrying and Stalled are
// those of a rollout with no outcome yet; Failed, Cancelled and Done are
// final.
const (
	// Queued: not started yet.
	Queued State = "queued"
	// Active: its /run call is in flight and it makes progress.
	Active State = "active"
	// Slow: its current stage has run longer than the slow rule allows
	// (see Rules), but it still counts as making progress.
	Slow State = "slow"
	// Retrying: an attempt failed and the next one has not yet started
	// or is in flight.
	Retrying State = "retrying"
	// Stalled: no progress for longer than the stall rule allows.
	Stalled State = "stalled"
	// Failed: every attempt failed, or the agent answered a failure.
	Failed State = "failed"
	// Cancelled: the run ended (stopped, interrupted) before it did.
	Cancelled State = "cancelled"
	// Done: its result was recorded.
	Done State = "done"
)

// Stage is what an active rollout is waiting on.
type Stage string

// The stages of a rollout, as its agent reports them. StageRun is the
// stage of a rollout whose agent reports none (an agent that is not
// gymlens's, or one that has not yet started the episode).
const (
	StageRun    Stage = "run"
	StageSeed   Stage = "seed_session"
	StageModel  Stage = "model_call"
	StageTool   Stage = "tool_call"
	StageVerify Stage = "verify"
)

// EpisodesPath is the route on which a gymlens agent server answers
// EpisodesReport: the episodes it has in flight and its stages' last
// minute. Like every gymlens route it asks for the head token when the
// fleet has one.
const EpisodesPath = contract.RoutePrefix + "episodes"

// Step is one finished stage of a rollout.
type Step struct {
	// Stage is what the step waited on; Turn the agent turn it belongs to
	// (1-based; 0 for steps outside the turn loop).
	Stage Stage `json:"stage"`
	Turn  int   `json:"turn,omitempty"`
	// Start is when it started; DurationMS how long it took.
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	// Status is the HTTP status of the call (0 when none was answered).
	Status int `json:"status,omitempty"`
}

// Episode is one rollout as the agent running it sees it.
type Episode struct {
	// RolloutID is the rollout's id as the agent received it (the
	// /ng-rollout/<id>/ prefix); episodes without one are not reported.
	RolloutID string `json:"rollout_id"`
	// TraceID is the trace the episode runs in, when the agent traces
	// it ("" otherwise), so that a rollout in flight names its trace
	// before its /run call answers.
	TraceID string `json:"trace_id,omitempty"`
	// Stage and Turn are what it waits on now, since StageStart.
	Stage      Stage     `json:"stage"`
	Turn       int       `json:"turn,omitempty"`
	StageStart time.Time `json:"stage_start"`
	// Start is when the episode began; LastProgress when a step last
	// finished (Start before the first).
	Start        time.Time `json:"start"`
	LastProgress time.Time `json:"last_progress"`
	// Steps are its most recent finished steps, oldest first, at most
	// MaxSteps.
	Steps []Step `json:"steps,omitempty"`
}

// MaxSteps bounds Episode.Steps and Rollout.Steps.
const MaxSteps = 16

// StageStats is one stage's last minute at one server.
type StageStats struct {
	Stage Stage `json:"stage"`
	// Count is the steps that finished in the window, Failed those of them
	// whose call failed (no answer, or a status of 400 or more).
	Count  int64 `json:"count"`
	Failed int64 `json:"failed"`
	// SuccessRate is (Count-Failed)/Count, 0 with no step.
	SuccessRate float64 `json:"success_rate"`
	// P50MS, P95MS and P99MS are latency percentiles of the window's steps
	// (0 with no step).
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	P99MS float64 `json:"p99_ms"`
}

// EpisodesReport is what an agent server answers on EpisodesPath.
type EpisodesReport struct {
	// Server is the agent's server name in the fleet config.
	Server string `json:"server"`
	// Time is when the report was made (the agent's clock).
	Time time.Time `json:"time"`
	// WindowSeconds is the span of Stages (60).
	WindowSeconds int `json:"window_seconds"`
	// Episodes are the episodes in flight, at most MaxEpisodes (the
	// longest-running first when there are more).
	Episodes []Episode `json:"episodes"`
	// Truncated counts the episodes in flight left out of Episodes.
	Truncated int `json:"truncated,omitempty"`
	// Stages is the last minute per stage.
	Stages []StageStats `json:"stages"`
}

// MaxEpisodes bounds EpisodesReport.Episodes.
const MaxEpisodes = 4096
