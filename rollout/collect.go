package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/dataset"
	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// Defaults for Options fields left at zero.
const (
	// DefaultConcurrency is the number of rollouts in flight by default.
	DefaultConcurrency = 8
	// DefaultProgressEvery is the default interval between plain progress
	// lines.
	DefaultProgressEvery = 5 * time.Second
)

// Span name and attribute of a collection run.
const (
	spanJob      = "gym.job"
	attrJobTasks = "nemo.gym.job.tasks"
)

// Options configure a collection run.
type Options struct {
	// AgentURL is the agent server's base URL, such as
	// "http://127.0.0.1:1234"; rollouts are POSTed to AgentURL + "/run".
	AgentURL string
	// Concurrency is the number of rollouts in flight at once; 0 or less
	// means DefaultConcurrency.
	Concurrency int
	// Client makes the /run calls; nil means a client with default
	// options, closed when the run ends. Its Timeout bounds each rollout.
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
	// started, and the ones in flight finish and are recorded (failures
	// included). Collect then returns ErrStopped if tasks remain. The
	// orchestrator closes it when a server of the fleet dies.
	Stop <-chan struct{}
}

// ErrStopped is returned by Collect when Options.Stop ended the run before
// every task was recorded; a later run with the same output resumes.
var ErrStopped = errors.New("rollout: stopped before every task ran")

// Record is one line of the output file: the outcome of one rollout.
type Record struct {
	// TaskID is the id of the task the rollout ran.
	TaskID string `json:"task_id"`
	// RolloutID is the id the agent gave the rollout; empty when no answer
	// came back.
	RolloutID string `json:"rollout_id"`
	// Reward and Correct are the verifier's score (0 and false on failure).
	Reward  float64 `json:"reward"`
	Correct bool    `json:"correct"`
	// Answer is the model's answer as the agent returned it.
	Answer string `json:"answer"`
	// Error says why the rollout failed; empty when it succeeded.
	Error string `json:"error,omitempty"`
	// DurationMS is the wall clock of the /run call as the collector saw
	// it, in milliseconds: queueing and network included, retries too.
	DurationMS float64 `json:"duration_ms"`
	// AgentDurationMS is the rollout's duration as the agent measured it;
	// 0 when the agent did not answer.
	AgentDurationMS float64 `json:"agent_duration_ms,omitempty"`
	// TraceID is the rollout's trace as the agent reported it ("" when the
	// agent recorded no span).
	TraceID string `json:"trace_id,omitempty"`
	// Attempted is when the /run call was sent, in UTC.
	Attempted time.Time `json:"attempted_at"`
}

// Failed reports whether the rollout failed.
func (r Record) Failed() bool { return r.Error != "" }

// Summary counts what a collection run did.
type Summary struct {
	// Total is the number of tasks given, skipped ones included.
	Total int
	// Skipped tasks already had a line in the output and were not run.
	Skipped int
	// Succeeded and Failed count the rollouts this run wrote.
	Succeeded, Failed int
	// Correct counts the succeeded rollouts the verifier scored correct.
	Correct int
	// RepairedBytes is the size of an incomplete last line that was cut
	// from the output before appending (0 when the file was intact); its
	// task was run again.
	RepairedBytes int64
	// Elapsed is the wall clock of the whole run.
	Elapsed time.Duration
	// DurationsMS holds Record.DurationMS of every rollout this run wrote,
	// failed ones included, in completion order. See Percentile.
	DurationsMS []float64
}

// Remaining is the number of tasks that still have no line in the output:
// 0 after a complete run, more after a cancelled one.
func (s Summary) Remaining() int { return s.Total - s.Skipped - s.Succeeded - s.Failed }

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

// CollectFile reads the tasks in inputPath (see dataset.ReadJSONL) and
// collects them into outputPath, like Collect.
func CollectFile(ctx context.Context, inputPath, outputPath string, opts Options) (Summary, error) {
	f, err := os.Open(inputPath)
	if err != nil {
		return Summary{}, fmt.Errorf("rollout: %w", err)
	}
	tasks, err := dataset.ReadJSONL(f)
	_ = f.Close()
	if err != nil {
		return Summary{}, fmt.Errorf("rollout: %s: %w", inputPath, err)
	}
	return Collect(ctx, tasks, outputPath, opts)
}

// Collect runs every task that has no line in the output file yet against
// the agent at opts.AgentURL, appending one JSON Record per rollout as it
// finishes. Failed rollouts are recorded and counted, not returned as
// errors. The error is for the run itself: bad options or tasks (nothing
// is then touched), an unreadable output file, a failed write to it (the
// run stops), or ctx ending before every task was recorded, in which case
// ctx.Err() comes back with the Summary of what was done.
func Collect(ctx context.Context, tasks []protocol.Task, output string, opts Options) (Summary, error) {
	return collect(ctx, tasks, output, opts, realClock)
}

func collect(ctx context.Context, tasks []protocol.Task, output string, opts Options, clk clock) (sum Summary, err error) {
	runURL, err := runURLOf(opts.AgentURL)
	if err != nil {
		return Summary{}, err
	}
	// Resuming goes by task id, so ids must be unique.
	if err := dataset.CheckTasks(tasks); err != nil {
		return Summary{}, fmt.Errorf("rollout: %w", err)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = DefaultProgressEvery
	}
	client := opts.Client
	if client == nil {
		client = server.NewClient(server.ClientOptions{})
		defer client.CloseIdleConnections()
	}

	started := clk.now()
	sum.Total = len(tasks)
	defer func() { sum.Elapsed = clk.now().Sub(started) }()

	if lens.Enabled(telemetry.GroupJob) {
		var span trace.Span
		ctx, span = lens.Start(ctx, telemetry.GroupJob, spanJob,
			trace.WithAttributes(attribute.Int(attrJobTasks, len(tasks))))
		defer func() { lens.End(span, err) }()
	}

	f, done, repaired, err := openOutput(output)
	if err != nil {
		return sum, err
	}
	sum.RepairedBytes = repaired
	todo := make([]protocol.Task, 0, len(tasks))
	for _, t := range tasks {
		if _, ok := done[t.ID]; !ok {
			todo = append(todo, t)
		}
	}
	sum.Skipped = len(tasks) - len(todo)
	sum.DurationsMS = make([]float64, 0, len(todo))

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &collector{
		client: client,
		runURL: runURL,
		clock:  clk,
		out:    f,
		sum:    &sum,
		cancel: cancel,
		job:    trace.SpanContextFromContext(ctx),
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
		total: len(tasks), skipped: sum.Skipped, started: started,
		recorded: &c.recorded, failed: &c.failed,
	}
	prog.start()

	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(opts.Concurrency, len(todo)) {
		wg.Go(func() {
			for runCtx.Err() == nil && !closed(opts.Stop) {
				i := int(next.Add(1) - 1)
				if i >= len(todo) {
					return
				}
				c.run(runCtx, todo[i])
			}
		})
	}
	wg.Wait()
	prog.finish()

	closeErr := f.Close()
	switch {
	case c.writeErr != nil:
		return sum, c.writeErr
	case closeErr != nil:
		return sum, fmt.Errorf("rollout: close output: %w", closeErr)
	case ctx.Err() != nil && sum.Remaining() > 0:
		return sum, ctx.Err()
	case closed(opts.Stop) && sum.Remaining() > 0:
		return sum, ErrStopped
	}
	return sum, nil
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

// collector is the state the workers of one run share.
type collector struct {
	client *server.Client
	runURL string
	clock  clock
	// job is the collection's gym.job span, when the job group is on.
	job trace.SpanContext
	// callCtx is what every rollout's /run call starts from: the run's
	// context, detached from the job's trace and linked to it when there
	// is a job span.
	callCtx context.Context
	cancel  context.CancelCauseFunc

	mu       sync.Mutex // serialises writes to out and updates of sum
	out      *os.File
	sum      *Summary
	writeErr error

	recorded, failed atomic.Int64 // for the progress output
}

// run performs one rollout and records it, unless ctx ended while it was
// in flight: such a rollout was cut short by the caller, not failed by the
// agent, so it is left for the next run.
func (c *collector) run(ctx context.Context, task protocol.Task) {
	start := c.clock.now()
	var resp protocol.RunResponse
	err := c.client.PostJSON(c.callCtx, c.runURL, protocol.RunRequest{Task: task}, &resp)
	elapsed := c.clock.now().Sub(start)
	if err != nil && ctx.Err() != nil {
		return
	}
	rec := Record{
		TaskID:     task.ID,
		DurationMS: float64(elapsed) / float64(time.Millisecond),
		Attempted:  start.UTC(),
	}
	if err != nil {
		rec.Error = err.Error()
	} else {
		rec.RolloutID = resp.RolloutID
		rec.Reward = resp.Reward
		rec.Correct = resp.Correct
		rec.Answer = resp.Answer
		rec.Error = resp.Error
		rec.AgentDurationMS = resp.DurationMS
		rec.TraceID = resp.TraceID
		if rec.Error == "" && resp.TaskID != "" && resp.TaskID != task.ID {
			rec.Error = fmt.Sprintf("agent answered for task %q instead", resp.TaskID)
		}
	}
	c.write(rec)
}

// write appends rec as one line with a single Write and counts it. The
// first write error stops the run.
func (c *collector) write(rec Record) {
	line, err := json.Marshal(rec)
	if err != nil { // only a NaN or infinite float could do this
		rec = Record{TaskID: rec.TaskID, Error: "encode record: " + err.Error(), Attempted: rec.Attempted}
		line, _ = json.Marshal(rec)
	}
	line = append(line, '\n')

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writeErr != nil {
		return
	}
	n, err := c.out.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.writeErr = fmt.Errorf("rollout: write output: %w", err)
		c.cancel(c.writeErr)
		return
	}
	s := c.sum
	s.DurationsMS = append(s.DurationsMS, rec.DurationMS)
	if rec.Failed() {
		s.Failed++
		c.failed.Add(1)
	} else {
		s.Succeeded++
		if rec.Correct {
			s.Correct++
		}
	}
	c.recorded.Add(1)
}

// runURLOf checks the agent's base URL and returns its /run endpoint.
func runURLOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("rollout: agent URL %q: %w", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("rollout: agent URL %q: want http://host:port", base)
	}
	return u.JoinPath("run").String(), nil
}
