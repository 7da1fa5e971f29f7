package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// TestHandleStream reads a body while its caller is still sending it
// (past the read timeout), and answers a body its stream function does
// not take exactly as Handle answers it.
func TestHandleStream(t *testing.T) {
	s := server.New(server.Uninstrumented(server.Options{Name: "stream", ReadTimeout: 100 * time.Millisecond}))
	firstPart := make(chan struct{})
	typed := func(_ context.Context, req protocol.AggregateMetricsRequest) (server.RawJSON, error) {
		return server.RawJSON(`"typed"`), nil
	}
	stream := func(_ context.Context, body io.Reader) (server.RawJSON, error) {
		head := make([]byte, 4)
		if _, err := io.ReadFull(body, head); err != nil || string(head) != "part" {
			return nil, server.ErrNotStreamed
		}
		close(firstPart)
		rest, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		return server.RawJSON(`"streamed ` + string(rest) + `"`), nil
	}
	server.HandleStream(s, "POST /stream", stream, typed)
	server.Handle(s, "POST /plain", typed)
	url := start(t, s)
	c := newClient(t)

	// The rest is sent only once the handler has read the first part, and
	// after the read timeout.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("part"))
		<-firstPart
		time.Sleep(300 * time.Millisecond)
		_, _ = pw.Write([]byte("two"))
		_ = pw.Close()
	}()
	var got server.RawJSON
	if err := c.PostStream(context.Background(), url+"/stream", pr, &got); err != nil || string(got) != `"streamed two"` {
		t.Fatalf("streamed: %s, %v", got, err)
	}

	for _, body := range []string{`{"verify_responses":[]}`, `{"verify_responses":[1]}`, `{"verify_responses":`, `[]`} {
		a, _ := c.Post(context.Background(), url+"/stream", server.RawJSON(body), nil, server.Call{AnyStatus: true})
		b, _ := c.Post(context.Background(), url+"/plain", server.RawJSON(body), nil, server.Call{AnyStatus: true})
		if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) {
			t.Errorf("%s: HandleStream %d %s, Handle %d %s", body, a.Status, a.Body, b.Status, b.Body)
		}
	}
}

// TestPostStreamStatus: a non-2xx answer to a streamed call is a
// *StatusError, as Post's.
func TestPostStreamStatus(t *testing.T) {
	s := server.New(server.Uninstrumented(server.Options{Name: "stream"}))
	s.HandleStreamFunc("POST /no", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(`{"detail":"short"}`))
	})
	url := start(t, s)
	var got server.RawJSON
	err := newClient(t).PostStream(context.Background(), url+"/no", bytes.NewReader([]byte(`{}`)), &got)
	var se *server.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusTeapot || se.Body != "short" {
		t.Fatalf("err = %v", err)
	}
}
