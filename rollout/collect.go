package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// Defaults for Options fields left at zero.
const (
	// DefaultConcurrency is the number of rollouts in flight by default.
	DefaultConcurrency = 8
	// DefaultProgressEvery is the default interval between plain progress
	// lines.
	DefaultProgressEvery = 5 * time.Second
	// DefaultMaxAttempts is the number of /run calls a rollout gets when
	// neither Options.MaxAttempts nor EnvMaxAttempts says otherwise.
	DefaultMaxAttempts = 3
	// DefaultFailureWindow is how many of the most recently finished
	// rollouts the failure-rate guard looks at (Options.FailureWindow).
	DefaultFailureWindow = 50
	// DefaultMaxFailureRate is the share of failed rollouts in that
	// window at which the run stops (Options.MaxFailureRate): 40 of the
	// last 50.
	DefaultMaxFailureRate = 0.8
)

// EnvMaxAttempts is the environment variable upstream reads for the
// number of attempts a rollout gets; Options.MaxAttempts 0 reads it too.
const EnvMaxAttempts = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"

// DefaultRepeatsKey is the key of Options.NumRepeatsByAgent that applies to
// agents it does not name.
const DefaultRepeatsKey = "_default"

// Members of the lines the collector writes (upstream's names).
const (
	// KeyEnvironmentServer names the environment server that ran a
	// rollout, and KeyResultType that server's implementation (such as
	// legacy_agent); a line of a rollout that was sent straight to its
	// agent has neither. A row may carry KeyEnvironmentServer to be
	// routed to that server.
	KeyEnvironmentServer = "_ng_environment_server"
	KeyResultType        = "_ng_result_type"
	// KeyTaskSource names the instance whose dataset a row came from; a
	// row without agent_ref is routed by it (Options.TaskSources). The
	// line keeps it, as it keeps KeySkillsRef.
	KeyTaskSource = "task_source"
	KeySkillsRef  = "skills_ref"
	// KeyFailureType, KeyFailureMessage, KeyFailureHTTPStatus and
	// KeyFailureResponseBody describe a /run call that came back without
	// a result, in a line of class FailureAgentRunError or
	// FailureAgentRequestFailed: the error's kind (named as upstream's
	// client names its exceptions: ClientResponseError,
	// ClientConnectorError, ServerDisconnectedError, TimeoutError,
	// JSONDecodeError, ...), its message, the HTTP status (null when no
	// answer came) and the answer's body (its first 2000 characters, with
	// "…" when cut; null when empty).
	KeyFailureType         = "_ng_failure_type"
	KeyFailureMessage      = "_ng_failure_message"
	KeyFailureHTTPStatus   = "_ng_failure_http_status"
	KeyFailureResponseBody = "_ng_failure_response_body"
	// FailureAgentRunError is the _ng_failure_class of a rollout whose
	// last /run call was answered with a status (any but a gateway's 429,
	// 502, 503 or 504): the rollout ran and broke.
	FailureAgentRunError = "agent_run_error"
	// FailureAgentRequestFailed is the _ng_failure_class of a rollout
	// whose last /run call got no answer, or a gateway status: nothing
	// says it ran.
	FailureAgentRequestFailed = "agent_request_failed"
	// KeyBookkeeping holds the collector's own record of a rollout (a
	// Bookkeeping) in every line it writes, succeeded or failed. It is
	// gymlens's alone: the report reads the rollout's trace id and
	// duration there. Upstream's aggregation skips members whose names
	// begin with "_", so it is never a metric.
	KeyBookkeeping = "_gymlens"
)

// Names of an earlier collector.
// Span name and attribute of a collection run.
const (
	spanJob      = contract.SpanJob
	attrJobTasks = contract.AttrJobTasks
)

// Bookkeeping is the collector's record of one rollout, written under
// KeyBookkeeping into its line.
type Bookkeeping struct {
	// TraceID is the rollout's trace: as the agent reported it in the
	// traceresponse header of its /run answer, else the trace of the
	// collector's own CLIENT span of the call (which the agent continues),
	// so a call that timed out or got no answer still names its trace;
	// "" when neither is known (no header and the http_client span group
	// off).
	TraceID string `json:"trace_id"`
	// RolloutID is the rollout's id (protocol.RunRequest.ResolveRolloutID
	// of the row as sent): "<task index>-<rollout index>", with "-a<n>"
	// for attempt n > 0, unless the row carries an explicit id.
	RolloutID string `json:"rollout_id"`
	// DurationMS is the wall clock of the last /run call as the collector
	// saw it, in milliseconds: queueing and network included.
	DurationMS float64 `json:"duration_ms"`
	// AttemptedAt is when the last /run call was sent, in UTC.
	AttemptedAt time.Time `json:"attempted_at"`
	// Attempts is the number of /run calls the rollout took in the run
	// that wrote the line.
	Attempts int `json:"attempts"`
}

// Options configure a collection run.
type Options struct {
	// Agents maps agent instance names to base URLs, such as
	// "simple_agent" to "http://127.0.0.1:1234"; a row's agent_ref.name
	// picks the agent. Its rollouts go to the environment server of
	// Environments that names it, as NeMo Gym 0.7's collector sends them;
	// an agent no environment server names has its own /run and
	// /aggregate_metrics called, and a log line says so.
	Agents map[string]string
	// Environments are the fleet's environment servers by instance name
	// (Fleet.Environments); nil, or one naming no agent of the rows,
	// sends the rows straight to their agents. Two environment servers
	// naming one agent are an error, as upstream cannot choose between
	// them. A row carrying _ng_environment_server goes to that server.
	Environments map[string]EnvironmentServer
	// TaskSources resolves the task_source of rows without agent_ref to
	// their agent (Fleet.TaskSources); the row's agent_ref is then set to
	// {"name": agent}.
	TaskSources map[string]TaskSource
	// AgentOverride, when set, is the agent of every row (upstream's
	// +agent_name, agent_map._default): a row's own agent_ref is replaced
	// by {"name": AgentOverride}, and one warning lists the agents it
	// replaced.
	AgentOverride string
	// DefaultAgent names the agent of rows with neither agent_ref nor
	// task_source (which is then set on them); "" makes such a row an
	// error.
	DefaultAgent string
	// NumRepeats is how many rollouts each row gets (upstream's
	// num_repeats); 0 means 1.
	NumRepeats int
	// NumRepeatsByAgent, when not nil, replaces NumRepeats with a count per
	// agent name; DefaultRepeatsKey covers the agents it does not name,
	// and a row whose agent is covered by neither is an error.
	NumRepeatsByAgent map[string]int
	// Limit, when positive, uses only the first Limit rows.
	Limit int
	// Concurrency is the number of rollouts in flight at once; 0 or less
	// means DefaultConcurrency.
	Concurrency int
	// Output is the path of the rollouts JSONL file (required). The
	// failures, materialized inputs and aggregate metrics files are named
	// after it (FailuresPath, MaterializedInputsPath,
	// AggregateMetricsPath).
	Output string
	// MaxAttempts is the number of /run calls a rollout gets before it is
	// recorded as failed; 0 reads EnvMaxAttempts, and DefaultMaxAttempts
	// when that is unset.
	MaxAttempts int
	// Resume continues the run recorded in Output: rollouts it completed
	// are skipped, failed ones run again. Without it the output and
	// failures files are started afresh.
	Resume bool
	// DisableAggregation skips the /aggregate_metrics calls and the
	// aggregate metrics file.
	DisableAggregation bool
	// Client makes the calls; nil means a client with default options,
	// closed when the run ends. Its Timeout bounds each /run call.
	Client *server.Client
	// Progress receives progress output; nil means none.
	Progress io.Writer
	// ProgressTTY selects a single progress bar line redrawn in place with
	// '\r' (for a terminal) instead of a plain line every ProgressEvery
	// (for logs and pipes).
	ProgressTTY bool
	// ProgressEvery is the interval between plain progress lines; 0 or less
	// means DefaultProgressEvery. The terminal bar is redrawn more often.
	ProgressEvery time.Duration
	// Stop, when closed, ends the run early but gently: no new rollout is
	// started and no failed call is retried; the rollouts in flight
	// finish and are recorded (failures included). Collect then returns
	// ErrStopped if rollouts remain, even when the failure-rate guard
	// tripped too (the failures of a dead server's rollouts are its
	// consequence). The orchestrator closes it when a server of the fleet
	// dies.
	Stop <-chan struct{}
	// FailureWindow and MaxFailureRate guard a run that is failing as a
	// whole (a server hung or gone, an upstream refusing every call): once
	// FailureWindow rollouts have finished, whenever MaxFailureRate or
	// more of the last FailureWindow failed on every attempt (a line of
	// class FailureAgentRunError or FailureAgentRequestFailed; an agent's
	// own _ng_failure_class answer is a result, not a failed call), the
	// run stops as with Stop and
	// Collect returns an error wrapping ErrFailureRate. FailureWindow 0
	// means DefaultFailureWindow, a negative one turns the guard off;
	// MaxFailureRate 0 means DefaultMaxFailureRate, otherwise it must be
	// in (0, 1].
	FailureWindow  int
	MaxFailureRate float64
	// Log receives the warnings and notes of a run (an agent override
	// that re-routed rows, agents called without an environment server);
	// nil means slog.Default().
	Log *slog.Logger
	// Live, when set, is told of every rollout as it is queued, started,
	// retried and finished, and of the episodes the run's agents report
	// (see package live); the rollouts still queued when the run stops
	// are cancelled there. nil costs a nil check per rollout.
	Live *live.Tracker
	// LiveEvery is how often, with Live, each agent of the run is asked
	// for its episodes (GET live.EpisodesPath); 0 means
	// DefaultLiveEvery. An agent that answers 404 (not gymlens's), or
	// refuses the call (401 or 403: LiveClient does not send the head
	// token the fleet has), is asked no more; its rollouts show the
	// collector's view only.
	LiveEvery time.Duration
	// LiveClient makes those calls; nil means a client of the run's own.
	// Give it the fleet's head token when the fleet has one (an
	// orchestrator.BearerTransport), as every gymlens route asks for it.
	LiveClient *http.Client
}

func (o *Options) logger() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.Default()
}

// ErrStopped is returned by Collect when Options.Stop ended the run before
// every rollout was recorded; a later run with Options.Resume continues.
var ErrStopped = errors.New("rollout: stopped before every rollout ran")

// ErrFailureRate is wrapped by Collect's error when the failure-rate
// guard (Options.FailureWindow, Options.MaxFailureRate) stopped the run;
// the message gives the figures and the last failure. A later run with
// Options.Resume continues.
var ErrFailureRate = errors.New("rollout: too many rollouts failing; stopped")

// ErrInvalidInput is wrapped by Collect's error when the options or the
// rows are unusable (and by CollectFile's when the task file cannot be
// read); nothing was run or written then.
var ErrInvalidInput = errors.New("rollout: invalid input")

// invalidInput marks err as ErrInvalidInput, keeping its message.
type invalidInput struct{ err error }

func (e invalidInput) Error() string   { return e.err.Error() }
func (e invalidInput) Unwrap() []error { return []error{e.err, ErrInvalidInput} }

// ErrFailedRollouts is wrapped by Collect's error when a rollout of the
// run ended failed (recorded in the failures file); every other rollout
// was still run and recorded.
var ErrFailedRollouts = errors.New("rollout: rollouts failed")

// Summary counts what a collection run did. Skipped rollouts were done by
// an earlier run; every other count is of this run alone.
type Summary struct {
	// Total is the number of rollouts of the run: rows (after Limit)
	// times their repeats, skipped ones included.
	Total int
	// Skipped rollouts already had a line in the output and were not run.
	Skipped int
	// Succeeded counts the rollouts written to the output; Failed those
	// written to the failures file (a /run that failed on every attempt,
	// or an answer carrying _ng_failure_class); Discarded the answers
	// carrying a truthy _ng_no_persist, written nowhere.
	Succeeded, Failed, Discarded int
	// Rewarded counts the succeeded rollouts whose reward is above 0.
	Rewarded int
	// Retries counts the /run calls beyond each rollout's first.
	Retries int
	// RepairedBytes is the size of the incomplete last lines cut from the
	// output and failures files before appending (0 when both were
	// intact); their rollouts ran again.
	RepairedBytes int64
	// Elapsed is the wall clock of the whole run.
	Elapsed time.Duration
	// AggregationElapsed is the part of Elapsed spent on the closing
	// /aggregate_metrics calls and the aggregate metrics file (0 with
	// aggregation off); Elapsed less it is the rollout phase.
	AggregationElapsed time.Duration
	// DurationsMS holds Bookkeeping.DurationMS of every rollout this run
	// recorded (failed and discarded ones included), in completion
	// order. See Percentile.
	DurationsMS []float64
	// Metrics are the servers' aggregate metrics, as written to the
	// aggregate metrics file; nil when there were none.
	Metrics []AgentMetrics
}

// Remaining is the number of rollouts that have no outcome yet: 0 after a
// complete run, more after a cancelled or stopped one.
func (s Summary) Remaining() int {
	return s.Total - s.Skipped - s.Ran()
}

// Ran is the number of rollouts this run recorded an outcome for:
// succeeded, failed and discarded. Skipped ones and the ones an early
// stop left undone are not counted.
func (s Summary) Ran() int { return s.Succeeded + s.Failed + s.Discarded }

// Rate is this run's throughput: the rollouts it ran (Ran, not Total)
// per second of its wall clock (Elapsed); 0 when no time was measured.
func (s Summary) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ran()) / s.Elapsed.Seconds()
}

// clock is the time source of a run, replaced in tests.
type clock struct {
	now    func() time.Time
	ticker func(time.Duration) (<-chan time.Time, func())
}

var realClock = clock{
	now: time.Now,
	ticker: func(d time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	},
}

// CollectFile reads the task file inputPath (see dataset.ReadRows; every
// line is checked, Limit or not) and collects its rows like Collect.
func CollectFile(ctx context.Context, inputPath string, opts Options) (Summary, error) {
	f, err := os.Open(inputPath)
	if err != nil {
		return Summary{}, invalidInput{fmt.Errorf("rollout: %w", err)}
	}
	rows, err := dataset.ReadRows(f)
	_ = f.Close()
	if err != nil {
		return Summary{}, invalidInput{fmt.Errorf("rollout: %s: %w", inputPath, err)}
	}
	return Collect(ctx, rows, opts)
}

// Collect runs the rollouts of rows against the fleet of opts (each
// through the environment server that fronts its agent, see the package
// documentation) and records each as it finishes: a completed rollout as
// one line of opts.Output, a failed one as a line of the failures file.
//
// Rows are expanded first, as upstream's collector does: identical rows
// (the same JSON encoding, where upstream compares raw lines) share one
// _ng_task_index, numbered 0, 1, ... in order of first appearance (a
// row's own index is kept); each row is repeated back to back with
// _ng_rollout_index 0, 1, ... (continuing across identical rows), and
// its agent is resolved (agent override, agent_ref, task_source,
// Options.DefaultAgent). The expanded rows go to the materialized inputs
// file. A /run call that fails is retried with _ng_attempt_index 1, 2,
// ... up to MaxAttempts calls. Each environment server's (or directly
// called agent's) /aggregate_metrics gets the successful results it ran
// (see AggregateMetricsPath): the call opens with its first result and
// its body is streamed as results come, closed when every rollout has
// ended; should that call fail, the results are sent again in one body.
//
// The error is for the run as a whole. Bad options or rows come back
// before anything is touched (wrapping ErrInvalidInput); an unreadable output, a failed write (the
// run stops), or ctx ending before every rollout was recorded (ctx.Err(),
// with the Summary of what was done) end it early. Otherwise it wraps
// ErrFailedRollouts when a rollout failed, and reports a failed
// /aggregate_metrics call.
func Collect(ctx context.Context, rows []protocol.RunRequest, opts Options) (Summary, error) {
	return collect(ctx, rows, opts, realClock)
}

func collect(ctx context.Context, rows []protocol.RunRequest, opts Options, clk clock) (sum Summary, err error) {
	p, err := prepare(rows, &opts)
	if err != nil {
		return Summary{}, invalidInput{err}
	}
	guard, err := newFailureGuard(opts.FailureWindow, opts.MaxFailureRate)
	if err != nil {
		return Summary{}, invalidInput{err}
	}
	client := opts.Client
	if client == nil {
		client = server.NewClient(server.ClientOptions{})
		defer client.CloseIdleConnections()
	}

	started := clk.now()
	sum.Total = len(p.rows)
	defer func() { sum.Elapsed = clk.now().Sub(started) }()

	if lens.Enabled(telemetry.GroupJob) {
		var span trace.Span
		ctx, span = lens.Start(ctx, telemetry.GroupJob, spanJob,
			trace.WithAttributes(attribute.Int(attrJobTasks, len(p.rows))))
		defer func() { lens.End(span, err) }()
	}

	files, err := openOutputs(opts.Output, opts.Resume, !opts.DisableAggregation)
	if err != nil {
		return sum, err
	}
	sum.RepairedBytes = files.repaired
	if err := writeRows(MaterializedInputsPath(opts.Output), p.rows); err != nil {
		_ = files.close()
		return sum, err
	}
	todo := make([]pending, 0, len(p.rows))
	for i, row := range p.rows {
		k := key{*row.TaskIndex, *row.RolloutIndex}
		if _, ok := files.done[k]; ok {
			continue
		}
		first := 0
		if row.AttemptIndex != nil {
			first = *row.AttemptIndex
		}
		if last, failed := files.lastAttempt[k]; failed {
			first = max(first, last+1)
		}
		todo = append(todo, pending{row: row, target: p.targets[i], first: first})
	}
	sum.Skipped = len(p.rows) - len(todo)
	sum.DurationsMS = make([]float64, 0, len(todo))

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &collector{
		client:      client,
		router:      p.router,
		maxAttempts: p.maxAttempts,
		clock:       clk,
		stop:        opts.Stop,
		files:       files,
		sum:         &sum,
		cancel:      cancel,
		job:         trace.SpanContextFromContext(ctx),
		guard:       guard,
		abort:       make(chan struct{}),
		live:        opts.Live,
	}
	if !opts.DisableAggregation {
		if c.entries, err = routePrior(p.router, files.prior); err != nil {
			_ = files.close()
			return sum, invalidInput{err}
		}
		// The /aggregate_metrics calls stream as the results come (see
		// pendingMetrics), under the job's context; a run that returns
		// before aggregating stops them.
		c.aggCtx = ctx
		defer c.abandonStreams()
	}
	c.callCtx = runCtx
	if c.job.IsValid() {
		// One rollout is one trace: detach from the job's trace and link
		// back to it instead, so a collection of 10,000 rollouts is not one
		// enormous trace. Made once; every rollout's call starts from it.
		c.callCtx = server.WithLinks(trace.ContextWithSpanContext(runCtx, trace.SpanContext{}),
			trace.Link{SpanContext: c.job})
	}
	prog := &progress{
		w: opts.Progress, tty: opts.ProgressTTY, every: opts.ProgressEvery, clock: clk,
		total: len(p.rows), skipped: sum.Skipped, started: started,
		recorded: &c.recorded, failed: &c.failed,
	}
	prog.start()

	// A fixed pool of workers, one per slot, runs the rollouts the
	// limiter admits; the limiter records the gym.concurrency.* metrics of
	// this site, and the next rollout waits here for a slot (queue depth 0
	// or 1: the rest of the backlog is not dispatched yet, the progress
	// line counts it). Workers outlive their rollouts, so the stack a
	// request's encoding grows is grown once per worker, not once per
	// rollout.
	lim := metrics.NewLimiter(contract.SiteRolloutCollection, p.concurrency)
	defer lim.Close() // a finished collection no longer counts in the gauges
	var poller *livePoller
	if c.live != nil {
		liveQueue(c.live, todo, sum.Skipped)
		if len(todo) > 0 {
			poller = startLivePoll(runCtx, c.live, opts.LiveClient, opts.LiveEvery,
				pollTargets(p.router, p.targets), clk, opts.logger())
		}
	}
	jobs := make(chan pending)
	var wg sync.WaitGroup
	for range min(p.concurrency, len(todo)) {
		wg.Go(func() {
			for job := range jobs {
				c.run(runCtx, job)
				lim.Release()
			}
		})
	}
	for _, job := range todo {
		if runCtx.Err() != nil || c.halted() || lim.Acquire(runCtx) != nil {
			break
		}
		if c.halted() { // stopped while waiting for the slot
			lim.Release()
			break
		}
		jobs <- job
	}
	close(jobs)
	wg.Wait()
	if poller != nil {
		poller.stop()
	}
	c.live.End() // what is still queued will not run
	prog.finish()

	closeErr := files.close()
	switch {
	case c.writeErr != nil:
		return sum, c.writeErr
	case closeErr != nil:
		return sum, fmt.Errorf("rollout: close output: %w", closeErr)
	case ctx.Err() != nil && sum.Remaining() > 0:
		return sum, ctx.Err()
	case closed(opts.Stop) && sum.Remaining() > 0:
		// Before the guard: the failures a dead server causes can trip it
		// before its death is seen, and the death is the cause.
		return sum, ErrStopped
	case c.abortErr != nil && sum.Remaining() > 0:
		return sum, c.abortErr
	}
	var errs []error
	if !opts.DisableAggregation {
		aggStart := clk.now()
		aggregated, err := c.aggregate(ctx, AggregateMetricsPath(opts.Output))
		sum.AggregationElapsed = clk.now().Sub(aggStart)
		sum.Metrics = aggregated
		if err != nil {
			errs = append(errs, err)
		}
	}
	if sum.Failed > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d run (see %s)", ErrFailedRollouts,
			sum.Failed, sum.Total-sum.Skipped, FailuresPath(opts.Output)))
	}
	return sum, errors.Join(errs...)
}

// closed reports whether ch is closed; a nil channel never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pending is a rollout to run: its row, its target, and the attempt
// index of its first call (past the attempts an earlier run recorded as
// failed).
type pending struct {
	row    protocol.RunRequest
	target *target
	first  int
}

// collector is the state the rollouts of one run share.
type collector struct {
	client      *server.Client
	router      *router
	maxAttempts int
	clock       clock
	stop        <-chan struct{}
	// job is the collection's gym.job span, when the job group is on.
	job trace.SpanContext
	// callCtx is what every rollout's /run call starts from: the run's
	// context, detached from the job's trace and linked to it when there
	// is a job span.
	callCtx context.Context
	cancel  context.CancelCauseFunc
	// abort is closed, and abortErr set, when the failure-rate guard
	// stops the run; it acts as Options.Stop does.
	abort    chan struct{}
	abortErr error

	mu       sync.Mutex // serialises writes to the files and updates of sum, entries and guard
	files    *outputs
	sum      *Summary
	guard    *failureGuard // nil when off
	writeErr error
	// entries are the successful results to aggregate, by target key,
	// as /aggregate_metrics takes them; nil when aggregation is off.
	entries map[string]*pendingMetrics
	// aggCtx is what the streamed /aggregate_metrics calls run under.
	aggCtx context.Context

	recorded, failed atomic.Int64 // for the progress output

	// live is Options.Live, nil when off.
	live *live.Tracker
}

// run performs one rollout, calling /run up to maxAttempts times, and
// records its outcome, unless ctx ended while a call was in flight: such
// a rollout was cut short by the caller, not failed by the agent, so it
// is left for the next run.
func (c *collector) run(ctx context.Context, job pending) {
	row := job.row
	runURL := job.target.run
	var lastErr error
	var lastReply server.Reply
	var meta Bookkeeping
	var lh *live.Handle // the rollout on Options.Live; nil when off
	for n := range c.maxAttempts {
		if idx := job.first + n; idx > 0 {
			row.AttemptIndex = &idx
		}
		id, _, _ := row.ResolveRolloutID() // checked by prepare
		if c.live != nil {
			lh = c.liveAttempt(lh, job, row, id)
		}
		start := c.clock.now()
		var result protocol.Fields
		// The id labels this call's CLIENT span (server.WithRolloutID).
		// PostSpan, so a call that got no answer (a timeout, a reset) still
		// names its trace: the CLIENT span's, which the agent continues.
		reply, err := c.client.PostSpan(server.WithRolloutID(c.callCtx, id), runURL, row, &result, server.Call{})
		if reply.Span != nil && reply.Span.IsRecording() {
			reply.AddSpanAttributes(telemetry.RolloutIdentity(row.TaskIndex, row.RolloutIndex, row.AttemptIndex)...)
		}
		reply.EndSpan()
		elapsed := c.clock.now().Sub(start)
		if err != nil && ctx.Err() != nil {
			lh.Finish(live.Cancelled, 0, "")
			return
		}
		if err == nil && result == nil {
			err = errNullResult
		}
		meta = Bookkeeping{TraceID: traceIDOf(reply.Header, reply.Span), RolloutID: id,
			DurationMS: float64(elapsed) / float64(time.Millisecond), AttemptedAt: start.UTC(), Attempts: n + 1}
		if err == nil {
			if lh == nil {
				c.record(row, job.target, result, meta)
				return
			}
			state, class := liveOutcome(result)
			c.record(row, job.target, result, meta)
			lh.SetTraceID(meta.TraceID)
			lh.Finish(state, reply.Status, class)
			return
		}
		lastErr, lastReply = err, reply
		if c.halted() {
			break
		}
		if lh != nil && n+1 < c.maxAttempts {
			lh.SetTraceID(meta.TraceID)
			lh.Retrying(failureKind(err, statusOf(err, reply)), statusOf(err, reply))
		}
	}
	if lh != nil {
		lh.SetTraceID(meta.TraceID)
		status := statusOf(lastErr, lastReply)
		lh.Finish(live.Failed, status, failureKind(lastErr, status))
	}
	c.fail(row, job.target, failureOf(lastErr, lastReply, runURL), lastErr, meta)
}

// halted reports whether the run is ending early: Options.Stop was closed
// or the failure-rate guard tripped.
func (c *collector) halted() bool { return closed(c.stop) || closed(c.abort) }

// finished feeds the failure-rate guard one finished rollout and stops
// the run when it trips. c.mu is held.
func (c *collector) finished(failed bool, err error) {
	if c.guard == nil || c.abortErr != nil {
		return
	}
	if msg, trip := c.guard.add(failed); trip {
		c.abortErr = fmt.Errorf("%w: %s; last failure: %v", ErrFailureRate, msg, err)
		close(c.abort)
	}
}

// stamp adds the collector's members to a line of row's rollout, as
// upstream's collector adds them (rollout_collection.py): the indexes,
// agent_ref, task_source and skills_ref of the row, its attempt index
// and explicit rollout id, the environment server that ran it and that
// server's implementation; then the collector's own record.
func stamp(line *protocol.Fields, row protocol.RunRequest, t *target, meta Bookkeeping) {
	_ = line.Set(protocol.KeyTaskIndex, *row.TaskIndex)
	_ = line.Set(protocol.KeyRolloutIndex, *row.RolloutIndex)
	if row.AgentRef != nil {
		_ = line.Set(protocol.KeyAgentRef, row.AgentRef)
	}
	for _, k := range []string{protocol.KeyAgentRef, KeyTaskSource, KeySkillsRef} {
		if raw, ok := row.Fields.Get(k); ok { // as the row has it
			line.SetRaw(k, raw)
		}
	}
	if row.AttemptIndex != nil {
		_ = line.Set(protocol.KeyAttemptIndex, *row.AttemptIndex)
	}
	if row.RolloutID != "" {
		_ = line.Set(protocol.KeyRolloutID, row.RolloutID)
	}
	if t.server != "" {
		_ = line.Set(KeyEnvironmentServer, t.server)
		_ = line.Set(KeyResultType, t.resultType)
	}
	_ = line.Set(KeyBookkeeping, meta)
}

// record writes the /run result of row with the collector's members added:
// to the output, to the failures file when it carries _ng_failure_class,
// or nowhere when it carries a truthy _ng_no_persist.
func (c *collector) record(row protocol.RunRequest, t *target, result protocol.Fields, meta Bookkeeping) {
	stamp(&result, row, t, meta)

	raw, _ := result.Get(protocol.KeyNoPersist)
	noPersist := truthy(raw)
	class, hasClass := result.Get(protocol.KeyFailureClass)
	failed := hasClass && !isNull(class)
	var reward float64
	_, _ = result.Decode(protocol.KeyReward, &reward)
	var entry []byte
	if c.entries != nil && !noPersist && !failed {
		entry = metricsEntry(result)
	}
	line, _ := result.MarshalJSON() // the members are raw JSON already
	line = append(line, '\n')

	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case noPersist:
		c.count(meta)
		c.sum.Discarded++
		c.finished(false, nil)
	case failed:
		if c.write(c.files.failures, line) {
			c.count(meta)
			c.sum.Failed++
			c.failed.Add(1)
			c.finished(false, nil)
		}
	default:
		if c.write(c.files.out, line) {
			c.count(meta)
			c.sum.Succeeded++
			if reward > 0 {
				c.sum.Rewarded++
			}
			if entry != nil {
				if c.entries[t.key] == nil {
					c.entries[t.key] = &pendingMetrics{}
				}
				c.entries[t.key].add(entry)
				c.entries[t.key].open(c.aggCtx, c.client, t.aggregate)
			}
			c.finished(false, nil)
		}
	}
}

// fail writes the failure line of a rollout whose every attempt failed:
// what failureOf says of the last call, with the collector's members.
func (c *collector) fail(row protocol.RunRequest, t *target, line protocol.Fields, err error, meta Bookkeeping) {
	stamp(&line, row, t, meta)
	out, _ := line.MarshalJSON()
	out = append(out, '\n')

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.write(c.files.failures, out) {
		c.count(meta)
		c.sum.Failed++
		c.failed.Add(1)
		c.finished(true, err)
	}
}

// gatewayStatus reports the statuses something in front of a server
// answers with; a rollout answered with one may never have run.
func gatewayStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// maxFailureBody is how much of a failed call's answer a failure line
// keeps, in characters.
const maxFailureBody = 2000

// failureOf describes a /run call that came back without a result as
// upstream's collector records one with route_failures_to_sidecar: the
// class (FailureAgentRunError when a status other than a gateway's came
// back, FailureAgentRequestFailed otherwise), the error's kind and
// message, the status and the body.
func failureOf(err error, reply server.Reply, runURL string) protocol.Fields {
	status := statusOf(err, reply)
	var se *server.StatusError
	var body []byte
	kind, msg := failureKind(err, status), err.Error()
	if errors.As(err, &se) {
		body = se.Raw
		// aiohttp's words for it, then what the peer said.
		msg = fmt.Sprintf("%d, message='%s', url='%s': %s", se.Status, http.StatusText(se.Status), runURL, se.Body)
	}
	class := FailureAgentRequestFailed
	if status != 0 && !gatewayStatus(status) {
		class = FailureAgentRunError
	}
	var line protocol.Fields
	_ = line.Set(protocol.KeyFailureClass, class)
	_ = line.Set(KeyFailureType, kind)
	_ = line.Set(KeyFailureMessage, msg)
	if status != 0 {
		_ = line.Set(KeyFailureHTTPStatus, status)
	} else {
		line.SetRaw(KeyFailureHTTPStatus, json.RawMessage("null"))
	}
	if text := truncatedBody(body); text != "" {
		_ = line.Set(KeyFailureResponseBody, text)
	} else {
		line.SetRaw(KeyFailureResponseBody, json.RawMessage("null"))
	}
	return line
}

// statusOf is the HTTP status of a failed /run call: the error's, else
// the reply's (a 2xx whose body was not a result); 0 when no answer came.
func statusOf(err error, reply server.Reply) int {
	if status := server.StatusOf(err); status != 0 {
		return status
	}
	return reply.Status
}

// failureKind names the kind of a failed /run call (status: statusOf) as
// upstream's client names its exceptions: the _ng_failure_type of its
// failure line, and the error class the live view shows.
func failureKind(err error, status int) string {
	var se *server.StatusError
	switch {
	case errors.As(err, &se):
		return "ClientResponseError"
	case errors.Is(err, errNullResult):
		return "TypeError"
	case status != 0:
		return "JSONDecodeError" // an answer came, its body did not decode
	case errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err):
		return "TimeoutError"
	case errors.Is(err, syscall.ECONNREFUSED) || isDial(err):
		return "ClientConnectorError"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "ServerDisconnectedError"
	}
	return "ClientError"
}

// errNullResult is the error of a /run answered with JSON null.
var errNullResult = errors.New("agent answered /run with null")

// truncatedBody is the start of a failed call's body as a failure line
// keeps it: its first maxFailureBody characters, "…" added when there
// was more.
func truncatedBody(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	if r := []rune(text); len(r) > maxFailureBody {
		text = string(r[:maxFailureBody])
	}
	if len(body) > maxFailureBody {
		text += "…"
	}
	return text
}

// isNetTimeout reports a network error that says it timed out.
func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isDial reports a failure to connect.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// write appends line to f with a single Write; the first write error
// stops the run. It reports whether the line was written. c.mu is held.
func (c *collector) write(f *os.File, line []byte) bool {
	if c.writeErr != nil {
		return false
	}
	n, err := f.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.writeErr = fmt.Errorf("rollout: write %s: %w", f.Name(), err)
		c.cancel(c.writeErr)
		return false
	}
	return true
}

// count adds a recorded rollout's duration and retries to the summary
// and the progress. c.mu is held.
func (c *collector) count(meta Bookkeeping) {
	c.sum.DurationsMS = append(c.sum.DurationsMS, meta.DurationMS)
	c.sum.Retries += meta.Attempts - 1
	c.recorded.Add(1)
}

// traceIDOf is the trace id a /run answer names: its traceresponse
// header's (the agent's own word), else the trace of the call's CLIENT
// span; "" when neither has one (an agent without telemetry, called with
// the http_client span group off).
func traceIDOf(h http.Header, span trace.Span) string {
	if id, ok := server.TraceResponseID(h); ok {
		return id.String()
	}
	if span != nil {
		if id := span.SpanContext().TraceID(); id.IsValid() {
			return id.String()
		}
	}
	return ""
}

// truthy reports whether raw is a value Python counts as true: not null,
// false, 0, "", [] or {}.
func truthy(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// isNull reports whether raw is the JSON literal null.
func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }
