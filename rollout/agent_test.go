package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// call is one /run request a fake agent received.
type call struct {
	// Task, Rollout and Attempt are the row's indexes (Attempt -1 when
	// the row had no _ng_attempt_index).
	Task, Rollout, Attempt int
	// Row is the body as a row; Body every member as it came.
	Row  protocol.RunRequest
	Body protocol.Fields
}

// answer is what a fake agent's /run sends back.
type answer struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Body is encoded as the answer; nil means echo(c, 1).
	Body any
	// Abort closes the connection without an answer.
	Abort bool
	// TraceResponse, when set, is sent as the traceresponse header.
	TraceResponse string
}

// runFunc is a fake agent's /run behaviour.
type runFunc func(ctx context.Context, c call) answer

// fakeAgent is an agent-like peer on loopback built on the project's server
// runtime. /run answers as runFunc says (by default: the row echoed with a
// response and reward 1, as upstream's /verify result looks);
// /aggregate_metrics records its request and answers the mean reward. It
// tracks the calls it saw and the peak number in flight.
type fakeAgent struct {
	URL  string
	addr string

	inFlight, maxInFlight atomic.Int64
	mu                    sync.Mutex
	calls                 []call
	aggregates            []protocol.AggregateMetricsRequest
	aggregateStatus       int // 0 means 200
	// aggregateStreams says what becomes of a streamed /aggregate_metrics
	// request; realMetrics answers them with environment.AggregateMetrics.
	aggregateStreams streamMode
	realMetrics      bool
	aggregateCalls   int // /aggregate_metrics requests seen, streamed or not

	stopOnce sync.Once
	cancel   context.CancelFunc
	served   chan error
}

// streamMode is what a fake agent does with a streamed /aggregate_metrics
// request: reads it whole at its end (the default), refuses it with 503,
// or drops its connection once the first result has come.
type streamMode int

const (
	readStreams streamMode = iota
	refuseStreams
	dropStreams
)

// startAgent serves fn (nil means answer every row with reward 1) until
// the test ends or Stop is called.
func startAgent(t *testing.T, fn runFunc) *fakeAgent {
	t.Helper()
	if fn == nil {
		fn = func(context.Context, call) answer { return answer{} }
	}
	a := &fakeAgent{served: make(chan error, 1)}
	s := server.New(server.Options{Name: "fake_agent"})
	s.HandleFunc("POST "+protocol.PathRun, func(w http.ResponseWriter, r *http.Request) {
		n := a.inFlight.Add(1)
		defer a.inFlight.Add(-1)
		for {
			peak := a.maxInFlight.Load()
			if n <= peak || a.maxInFlight.CompareAndSwap(peak, n) {
				break
			}
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := call{Attempt: -1}
		if err := json.Unmarshal(raw, &c.Row); err != nil || c.Row.Validate() != nil ||
			c.Row.TaskIndex == nil || c.Row.RolloutIndex == nil || c.Body.UnmarshalJSON(raw) != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"detail":%q}`, fmt.Sprint("bad row: ", err))
			return
		}
		c.Task, c.Rollout = *c.Row.TaskIndex, *c.Row.RolloutIndex
		if c.Row.AttemptIndex != nil {
			c.Attempt = *c.Row.AttemptIndex
		}
		a.mu.Lock()
		a.calls = append(a.calls, c)
		a.mu.Unlock()

		ans := fn(r.Context(), c)
		if ans.Abort {
			panic(http.ErrAbortHandler) // the connection is closed unanswered
		}
		body := ans.Body
		if body == nil {
			body = echo(c, 1)
		}
		if ans.TraceResponse != "" {
			w.Header().Set("traceresponse", ans.TraceResponse)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(max(ans.Status, http.StatusOK))
		_ = json.NewEncoder(w).Encode(body)
	})
	// A streamed request (no length) is refused or dropped as
	// aggregateStreams says, else read whole at its end.
	stream := func(ctx context.Context, body io.Reader) (protocol.AggregateMetricsResponse, error) {
		a.mu.Lock()
		mode := a.aggregateStreams
		a.aggregateCalls++
		a.mu.Unlock()
		if server.Request(ctx).ContentLength >= 0 {
			return protocol.AggregateMetricsResponse{}, server.ErrNotStreamed
		}
		switch mode {
		case refuseStreams:
			return protocol.AggregateMetricsResponse{}, server.Errorf(http.StatusServiceUnavailable, "no streams today")
		case dropStreams: // once the first result is in
			_ = aggstream.Each(body, false, func([]byte) error { panic(http.ErrAbortHandler) })
		}
		return protocol.AggregateMetricsResponse{}, server.ErrNotStreamed
	}
	server.HandleStream(s, "POST "+protocol.PathAggregateMetrics, stream, func(_ context.Context, req protocol.AggregateMetricsRequest) (protocol.AggregateMetricsResponse, error) {
		a.mu.Lock()
		a.aggregates = append(a.aggregates, req)
		status := a.aggregateStatus
		real := a.realMetrics
		a.mu.Unlock()
		if status != 0 {
			return protocol.AggregateMetricsResponse{}, server.Errorf(status, "no metrics today")
		}
		if real {
			return environment.AggregateMetrics(req.VerifyResponses), nil
		}
		var sum float64
		for _, r := range req.VerifyResponses {
			var reward float64
			_, _ = r.Decode(protocol.KeyReward, &reward)
			sum += reward
		}
		mean := sum / float64(len(req.VerifyResponses))
		return protocol.AggregateMetricsResponse{
			AgentMetrics:      map[string]any{"mean/reward": mean, "count": len(req.VerifyResponses)},
			KeyMetrics:        map[string]any{"mean/reward": mean},
			GroupLevelMetrics: []json.RawMessage{json.RawMessage(`{"group":"all"}`)},
		}, nil
	})
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	a.addr = addr.String()
	a.URL = "http://" + a.addr
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("fake agent: %v", err)
		}
	})
	return a
}

// echo is upstream's verify result for c: the row as it came, the episode
// and the reward.
func echo(c call, reward float64) protocol.Fields {
	out := c.Body.Clone()
	resp := protocol.Response{ID: "resp_1", Object: protocol.ObjectResponse, CreatedAt: 1767225600, Model: "fake",
		Output:            []protocol.Item{protocol.AssistantMessage("msg_1", "The answer is 42.")},
		ParallelToolCalls: true, ToolChoice: protocol.ToolChoice{Mode: protocol.ToolChoiceAuto}, Tools: []protocol.Tool{},
		Status: "completed", Usage: protocol.NewUsage(12, 7)}
	_ = out.Set(protocol.KeyResponse, resp)
	_ = out.Set(protocol.KeyReward, reward)
	_ = out.Set("extracted_answer", "42")
	return out
}

// Stop shuts the server down, waiting for in-flight requests; it is safe to
// call more than once.
func (a *fakeAgent) Stop() (err error) {
	a.stopOnce.Do(func() {
		a.cancel()
		err = <-a.served
	})
	return err
}

// beginStop starts the shutdown from inside a handler and returns once the
// listener is closed, so every later connection is refused. (Stop itself
// would wait for the calling handler: a deadlock.)
func (a *fakeAgent) beginStop() {
	a.cancel()
	for {
		c, err := net.Dial("tcp", a.addr)
		if err != nil {
			return
		}
		_ = c.Close()
		time.Sleep(time.Millisecond)
	}
}

// Calls returns the /run calls the agent received, in arrival order.
func (a *fakeAgent) Calls() []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]call(nil), a.calls...)
}

// Aggregates returns the /aggregate_metrics requests it received.
func (a *fakeAgent) Aggregates() []protocol.AggregateMetricsRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]protocol.AggregateMetricsRequest(nil), a.aggregates...)
}

// failAggregates makes /aggregate_metrics answer status.
func (a *fakeAgent) failAggregates(status int) {
	a.mu.Lock()
	a.aggregateStatus = status
	a.mu.Unlock()
}
