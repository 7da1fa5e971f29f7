package rollout_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/server"
)

// runFunc is a fake agent's /run behaviour.
type runFunc func(context.Context, protocol.RunRequest) (protocol.RunResponse, error)

// fakeAgent is an agent-like peer on loopback built on the project's server
// runtime. It tracks the requests it saw and the peak number in flight.
type fakeAgent struct {
	URL  string
	addr string

	inFlight, maxInFlight atomic.Int64
	mu                    sync.Mutex
	seen                  []string

	stopOnce sync.Once
	cancel   context.CancelFunc
	served   chan error
}

// startAgent serves fn (nil means answer every task correctly) until the
// test ends or Stop is called.
func startAgent(t *testing.T, fn runFunc) *fakeAgent {
	t.Helper()
	if fn == nil {
		fn = answerCorrectly
	}
	a := &fakeAgent{served: make(chan error, 1)}
	s := server.New(server.Options{Name: "fake_agent"})
	server.Handle(s, protocol.RouteRun, func(ctx context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
		n := a.inFlight.Add(1)
		defer a.inFlight.Add(-1)
		for {
			peak := a.maxInFlight.Load()
			if n <= peak || a.maxInFlight.CompareAndSwap(peak, n) {
				break
			}
		}
		a.mu.Lock()
		a.seen = append(a.seen, req.Task.ID)
		a.mu.Unlock()
		return fn(ctx, req)
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

// Seen returns the task ids the agent received, in arrival order.
func (a *fakeAgent) Seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func answerCorrectly(_ context.Context, req protocol.RunRequest) (protocol.RunResponse, error) {
	return protocol.RunResponse{
		RolloutID:  "ro-" + req.Task.ID,
		TaskID:     req.Task.ID,
		Answer:     req.Task.Expected,
		Reward:     1,
		Correct:    true,
		DurationMS: 1.5,
	}, nil
}

var errBoom = errors.New("agent exploded")
