package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/server"
)

// TestRawJSONWrittenAsItIs: a typed handler's RawJSON result is the
// answer's body byte for byte (layout, escapes, number spellings, repeated
// members), where a json.RawMessage result is encoded (compacted); an
// error still wins over the result.
func TestRawJSONWrittenAsItIs(t *testing.T) {
	const body = "{ \"b\": 1.50,\n \"a\":null, \"s\":\"\\u00e9<>\", \"a\":[1E2] }\n"
	s := server.New(server.Uninstrumented(server.Options{Name: "raw", Logger: slog.New(slog.DiscardHandler)}))
	server.Handle(s, "POST /raw", func(context.Context, struct{}) (server.RawJSON, error) {
		return server.RawJSON(body), nil
	})
	server.Handle(s, "POST /message", func(context.Context, struct{}) (json.RawMessage, error) {
		return json.RawMessage(body), nil
	})
	server.Handle(s, "POST /fail", func(context.Context, struct{}) (server.RawJSON, error) {
		return server.RawJSON(body), errors.New("no")
	})
	h := s.Handler()
	call := func(path string) (int, string, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`)))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, rec.Header().Get("Content-Type"), string(b)
	}
	if code, ct, got := call("/raw"); code != http.StatusOK || ct != "application/json" || got != body {
		t.Errorf("RawJSON: %d %q %q, want 200 application/json and the bytes as they are", code, ct, got)
	}
	if code, _, got := call("/message"); code != http.StatusOK || got == body || !json.Valid([]byte(got)) || strings.Contains(strings.TrimSuffix(got, "\n"), "\n") {
		t.Errorf("json.RawMessage: %d %q, want it encoded (compacted)", code, got)
	}
	if code, _, got := call("/fail"); code != http.StatusInternalServerError || got == body {
		t.Errorf("RawJSON with an error: %d %q, want the 500", code, got)
	}
}

// TestRawJSONRequestSentAsItIs: Client.Post sends a RawJSON request body
// byte for byte, where any other value goes through encoding/json (which
// compacts it and escapes <, > and &).
func TestRawJSONRequestSentAsItIs(t *testing.T) {
	const body = "{ \"s\": \"<a&b>\",\n \"n\": 1.50 }"
	got := make(chan string, 2)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		_, _ = io.WriteString(w, "{}")
	}))
	defer peer.Close()
	c := server.NewClient(server.ClientOptions{})
	defer c.CloseIdleConnections()
	if _, err := c.Post(context.Background(), peer.URL, server.RawJSON(body), nil, server.Call{}); err != nil {
		t.Fatal(err)
	}
	if sent := <-got; sent != body {
		t.Errorf("RawJSON request sent as %q, want %q", sent, body)
	}
	if _, err := c.Post(context.Background(), peer.URL, json.RawMessage(body), nil, server.Call{}); err != nil {
		t.Fatal(err)
	}
	if sent := <-got; sent == body || !strings.Contains(sent, `\u003ca\u0026b\u003e`) {
		t.Errorf("json.RawMessage request sent as %q, want it encoded", sent)
	}
}
