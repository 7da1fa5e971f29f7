package rollout_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// Issue 16, item 2: a run whose every call fails used to crawl through
// every task. The failure-rate guard stops it once a full window of
// recent rollouts is failing, as Stop would: in-flight rollouts finish,
// no new one starts, and the error says why.
func TestCollectStopsWhenMostRolloutsFail(t *testing.T) {
	agent := startAgent(t, func(context.Context, call) answer {
		return answer{Status: http.StatusBadGateway, Body: "model call: connection refused"}
	})
	const tasks, window, concurrency = 500, 20, 4
	out := outPath(t)
	opts := options(agent, out)
	opts.MaxAttempts, opts.Concurrency = 1, concurrency
	opts.FailureWindow, opts.MaxFailureRate = window, 0.5
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	sum, err := rollout.Collect(ctx, dataset.Arithmetic(tasks, 1), opts)
	if !errors.Is(err, rollout.ErrFailureRate) {
		t.Fatalf("err = %v, want ErrFailureRate (%+v)", err, sum)
	}
	t.Logf("%v", err)
	for _, want := range []string{"20 of the last 20 rollouts failed", "limit is 50%", "model call: connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	calls := len(agent.Calls())
	if sum.Failed < window || sum.Failed > window+concurrency || calls != sum.Failed || sum.Remaining() != tasks-sum.Failed {
		t.Errorf("%d calls, summary %+v; want the run stopped after about %d rollouts", calls, sum, window)
	}
	if n := len(readLines(t, rollout.FailuresPath(out))); n != sum.Failed {
		t.Errorf("%d failure lines for %d failures", n, sum.Failed)
	}
}

// A stop after the guard tripped is reported as the stop: a server's
// death makes its rollouts fail fast, and those failures can trip the
// guard before the death is seen (TestSIGKILLOfServerMidRun raced so).
func TestCollectStopOutranksFailureRate(t *testing.T) {
	const window = 5
	stop := make(chan struct{})
	var calls atomic.Int32
	agent := startAgent(t, func(context.Context, call) answer {
		if calls.Add(1) == window { // the server "dies" as the call that trips the guard fails
			close(stop)
		}
		return answer{Status: http.StatusBadGateway, Body: "model call: connection refused"}
	})
	opts := options(agent, outPath(t))
	opts.MaxAttempts, opts.Concurrency = 1, 1
	opts.FailureWindow, opts.MaxFailureRate = window, 0.5
	opts.Stop = stop
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	sum, err := rollout.Collect(ctx, dataset.Arithmetic(200, 1), opts)
	if !errors.Is(err, rollout.ErrStopped) || errors.Is(err, rollout.ErrFailureRate) || sum.Remaining() == 0 {
		t.Fatalf("err = %v (%+v), want ErrStopped with rollouts left", err, sum)
	}
}

// A run failing less than the limit goes on to the end; so does one with
// the guard off; a limit outside (0, 1] is refused before anything runs.
func TestCollectFailureGuardLimits(t *testing.T) {
	// Three tasks in ten fail, in order (one rollout at a time): 6 of
	// every 20, under the 50% limit.
	agent := startAgent(t, func(_ context.Context, c call) answer {
		if c.Task%10 < 3 {
			return answer{Status: http.StatusInternalServerError, Body: "flaky"}
		}
		return answer{}
	})
	opts := options(agent, outPath(t))
	opts.MaxAttempts, opts.Concurrency = 1, 1
	opts.FailureWindow, opts.MaxFailureRate = 20, 0.5
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(100, 1), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || errors.Is(err, rollout.ErrFailureRate) || sum.Remaining() != 0 || sum.Failed != 30 {
		t.Errorf("30%% failing: %+v, %v; want every rollout run", sum, err)
	}

	failing := startAgent(t, func(context.Context, call) answer { return answer{Status: http.StatusBadGateway} })
	opts = options(failing, outPath(t))
	opts.MaxAttempts, opts.FailureWindow = 1, -1
	sum, err = rollout.Collect(context.Background(), dataset.Arithmetic(80, 1), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || errors.Is(err, rollout.ErrFailureRate) || sum.Failed != 80 {
		t.Errorf("guard off: %+v, %v; want all 80 run", sum, err)
	}

	for _, rate := range []float64{-0.1, 1.5} {
		opts := options(failing, outPath(t))
		opts.MaxFailureRate = rate
		_, err := rollout.Collect(context.Background(), dataset.Arithmetic(2, 1), opts)
		if !errors.Is(err, rollout.ErrInvalidInput) || !strings.Contains(err.Error(), "MaxFailureRate") {
			t.Errorf("MaxFailureRate %v: %v, want ErrInvalidInput naming it", rate, err)
		}
	}
}

// Issue 16, item 10: a rollout whose /run call timed out (no answer, so no
// traceresponse header) still names its rollout and its trace: the
// collector's CLIENT span's, which the agent continued.
func TestCollectTimedOutRolloutKeepsItsIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h := servertest.EnableTelemetry(t, telemetry.InitOptions{ServerName: "collector", SpanExporter: exp})
	if !h.TracesExporting() {
		t.Fatal("telemetry on, but traces not exporting")
	}
	agent := startAgent(t, func(ctx context.Context, c call) answer {
		if c.Task == 1 {
			select { // outlives the client's timeout
			case <-ctx.Done():
			case <-time.After(hangGuard):
			}
		}
		return answer{}
	})
	client := server.NewClient(server.ClientOptions{Timeout: 300 * time.Millisecond, Retries: -1})
	t.Cleanup(client.CloseIdleConnections)
	out := outPath(t)
	opts := options(agent, out)
	opts.Client, opts.MaxAttempts = client, 1
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(3, 4), opts)
	if !errors.Is(err, rollout.ErrFailedRollouts) || sum.Failed != 1 {
		t.Fatalf("%+v, %v; want the one timed-out rollout failed", sum, err)
	}
	if err := agent.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := h.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	clientTrace := map[string]trace.TraceID{} // rollout id -> its CLIENT span's trace
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			if id := servertest.Attrs(s.Attributes)[contract.AttrRolloutID]; id != "" {
				clientTrace[id] = s.SpanContext.TraceID()
			}
		}
	}
	fails := readLines(t, rollout.FailuresPath(out))
	if len(fails) != 1 {
		t.Fatalf("%d failure lines", len(fails))
	}
	m := get[rollout.Bookkeeping](t, fails[0], rollout.KeyBookkeeping)
	msg := get[string](t, fails[0], rollout.KeyFailureMessage)
	t.Logf("timed-out rollout: %+v (%s)", m, msg)
	if m.RolloutID != "1-0" {
		t.Errorf("timed-out rollout id %q, want 1-0", m.RolloutID)
	}
	if want, ok := clientTrace["1-0"]; !ok || m.TraceID != want.String() {
		t.Errorf("timed-out rollout trace %q, want its CLIENT span's %v (found %v)", m.TraceID, want, ok)
	}
	if !strings.Contains(msg, "deadline exceeded") {
		t.Errorf("failure %q, want a timeout", msg)
	}
}

// Issue 16, item 10: after an early stop, the rate is of the rollouts run,
// over the time taken, never of the tasks requested.
func TestSummaryRateCountsWhatRan(t *testing.T) {
	s := rollout.Summary{Total: 1000, Skipped: 100, Succeeded: 400, Failed: 14, Discarded: 2, Elapsed: 2 * time.Second}
	if s.Ran() != 416 || s.Remaining() != 484 || s.Rate() != 208 {
		t.Errorf("Ran %d, Remaining %d, Rate %v; want 416, 484, 208", s.Ran(), s.Remaining(), s.Rate())
	}
	if (rollout.Summary{Total: 5}).Rate() != 0 {
		t.Error("a run with no elapsed time has a rate")
	}

	// A real run stopped early: the rate is of what it ran.
	stop := make(chan struct{})
	agent := startAgent(t, func(_ context.Context, c call) answer {
		if c.Task == 40 {
			close(stop)
		}
		return answer{}
	})
	opts := options(agent, outPath(t))
	opts.Concurrency, opts.Stop = 1, stop
	sum, err := rollout.Collect(context.Background(), dataset.Arithmetic(1000, 1), opts)
	if !errors.Is(err, rollout.ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", err)
	}
	want := float64(sum.Ran()) / sum.Elapsed.Seconds()
	if sum.Ran() != 41 || sum.Rate() != want {
		t.Errorf("ran %d at %v/s; want 41 at %v/s", sum.Ran(), sum.Rate(), want)
	}
}
