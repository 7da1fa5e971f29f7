package aggstream_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
)

// answerTarget serves /aggregate_metrics: it reads the whole request, then
// answers with head, flushed, and with tail once release is closed (or
// "late" after 10 s, so that a forwarder waiting for the whole answer
// fails the test rather than hanging it). marked sets CompleteHeader; cut
// closes the connection after head instead of sending tail.
func answerTarget(t *testing.T, head, tail string, marked, cut bool, release <-chan struct{}) string {
	t.Helper()
	s := server.New(server.Options{Name: "target"})
	s.HandleStreamFunc("POST /aggregate_metrics", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("target: reading the request: %v", err)
		}
		if marked {
			w.Header().Set(aggstream.CompleteHeader, aggstream.CompleteValue)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, head)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			_, _ = io.WriteString(w, "late")
			return
		}
		if cut {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, tail)
	})
	base, _ := servertest.Start(t, s)
	return base + "/aggregate_metrics"
}

// signalWriter collects what is written and closes seen once it holds want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (s *signalWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(b)
	if strings.HasPrefix(s.buf.String(), s.want) {
		s.once.Do(func() { close(s.seen) })
	}
	return len(b), nil
}

const request = aggstream.Open + `{"reward":1},{"reward":0}` + aggstream.Close

// TestForwardPassesAMarkedAnswerAsItArrives: the target sends the first
// part of a marked answer and the rest only once that part has come out
// of Answer.WriteTo, so a forwarder that read the answer whole first
// would get the target's "late" ending instead.
func TestForwardPassesAMarkedAnswerAsItArrives(t *testing.T) {
	head, tail := `{"group_level_metrics":[{"a":1}`, `],"agent_metrics":{},"key_metrics":{},"perf_summary":null,"repeat_level_metrics":[]}`
	release := make(chan struct{})
	url := answerTarget(t, head, tail, true, false, release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer, err := aggstream.Forward(ctx, servertest.Client(t), url, strings.NewReader(request))
	if err != nil {
		t.Fatal(err)
	}
	if !answer.Passed() || answer.Raw != nil {
		t.Fatalf("a marked answer was not passed on as it arrives: passed %t, %d bytes read whole", answer.Passed(), len(answer.Raw))
	}
	if answer.Header().Get(aggstream.CompleteHeader) != aggstream.CompleteValue {
		t.Errorf("the header to pass on does not keep the mark: %v", answer.Header())
	}
	w := &signalWriter{want: head, seen: make(chan struct{})}
	go func() {
		<-w.seen
		close(release)
	}()
	if _, err := answer.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	if got := w.buf.String(); got != head+tail {
		t.Errorf("passed on %q, want %q", got, head+tail)
	}
}

// TestForwardReadsAnUnmarkedAnswerWhole: without the mark (NeMo Gym's
// servers send none) the answer is read whole, as it came.
func TestForwardReadsAnUnmarkedAnswerWhole(t *testing.T) {
	release := make(chan struct{})
	close(release)
	url := answerTarget(t, `{"group_level_metrics":[],`, `"other":1}`, false, false, release)
	answer, err := aggstream.Forward(context.Background(), servertest.Client(t), url, strings.NewReader(request))
	if err != nil {
		t.Fatal(err)
	}
	if answer.Passed() || string(answer.Raw) != `{"group_level_metrics":[],"other":1}` {
		t.Errorf("unmarked answer: passed %t, raw %q", answer.Passed(), answer.Raw)
	}
}

// TestForwardCutAnswer: a marked answer whose connection closes midway is
// an error of WriteTo, after what had arrived was passed on.
func TestForwardCutAnswer(t *testing.T) {
	head := `{"group_level_metrics":[{"a":1}`
	release := make(chan struct{})
	url := answerTarget(t, head, "never sent", true, true, release)
	answer, err := aggstream.Forward(context.Background(), servertest.Client(t), url, strings.NewReader(request))
	if err != nil {
		t.Fatal(err)
	}
	w := &signalWriter{want: head, seen: make(chan struct{})}
	go func() {
		<-w.seen
		close(release)
	}()
	if _, err := answer.WriteTo(w); err == nil {
		t.Errorf("a cut answer passed on with no error: %q", w.buf.String())
	}
	if got := w.buf.String(); got != head {
		t.Errorf("passed on %q before the cut, want %q", got, head)
	}
}
