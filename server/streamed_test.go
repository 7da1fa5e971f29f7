package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
)

// TestStreamedAnswers: a typed handler's Streamed answer goes out with
// its header and every byte (more than one piece); a failure before the
// first byte is answered as the handler's error; a failure after it cuts
// the connection, so the caller's read fails rather than ending well.
func TestStreamedAnswers(t *testing.T) {
	long := `"` + strings.Repeat("x", 3*server.StreamedChunk) + `"`
	failEarly, failLate := errors.New("no metrics"), errors.New("gone midway")
	s := server.New(server.Options{Name: "streamer"})
	server.Handle(s, "POST /stream", func(_ context.Context, req struct{ Mode string }) (server.Streamed, error) {
		return server.Streamed{Header: http.Header{"X-Piece": {"1"}}, Write: func(w io.Writer) error {
			switch req.Mode {
			case "early":
				return failEarly
			case "late":
				_, _ = io.WriteString(w, long[:len(long)-1])
				return failLate
			}
			_, err := io.WriteString(w, long)
			return err
		}}, nil
	})
	base, _ := servertest.Start(t, s)
	post := func(mode string) (*http.Response, []byte, error) {
		res, err := http.Post(base+"/stream", "application/json", strings.NewReader(`{"Mode":"`+mode+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res, b, err
	}

	res, body, err := post("whole")
	if err != nil || res.StatusCode != http.StatusOK || string(body) != long {
		t.Errorf("whole answer: %d, %d bytes (want %d), %v", res.StatusCode, len(body), len(long), err)
	}
	if res.Header.Get("X-Piece") != "1" || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("whole answer's header: %v", res.Header)
	}

	res, body, err = post("early")
	if err != nil || res.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), failEarly.Error()) {
		t.Errorf("failure before the first byte: %d %q, %v; want a 500 naming it", res.StatusCode, body, err)
	}

	res, body, err = post("late")
	if err == nil {
		t.Errorf("failure midway: status %d, %d bytes read with no error; want a cut answer", res.StatusCode, len(body))
	}
}
