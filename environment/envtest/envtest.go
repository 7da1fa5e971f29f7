package envtest

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// Instance is the instance name Serve gives the environment's server, so
// its session cookie is named "<environment>___test".
const Instance = "test"

// Serve runs env on a server built with its ServerOptions(Instance) on
// 127.0.0.1 and a free port, and returns the base URL
// ("http://127.0.0.1:PORT"). The server drains and stops when the test
// ends, through the same rig that serves the built-in servers in this
// module's own tests. Its log is discarded: injected panics would fill
// the test log with stacks.
func Serve(t testing.TB, env *environment.Environment) string {
	t.Helper()
	opts := environment.ServerOptions(env.Name(), Instance)
	opts.Name, opts.Logger = env.Name(), slog.New(slog.DiscardHandler)
	s := server.New(opts)
	env.Register(s)
	base, _ := servertest.Start(t, s)
	return base
}

// Row returns a dataset row whose prompt is one user message saying
// prompt, with the given task fields (in key order).
func Row(prompt string, fields map[string]any) protocol.RunRequest {
	row := protocol.RunRequest{ResponsesCreateParams: protocol.ResponseCreateParams{
		Input: protocol.ItemsInput(protocol.UserMessage(prompt))}}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := row.Fields.Set(k, fields[k]); err != nil {
			panic("envtest: field " + k + ": " + err.Error())
		}
	}
	return row
}

// Answer returns a completed model response whose output is one
// assistant message per text, each with one output_text part.
func Answer(texts ...string) protocol.Response {
	items := make([]protocol.Item, len(texts))
	for i, text := range texts {
		items[i] = protocol.AssistantMessage("msg_"+string(rune('a'+i%26)), text)
	}
	return Response(items...)
}

// Response returns a completed model response with the given output
// items.
func Response(items ...protocol.Item) protocol.Response {
	if items == nil {
		items = []protocol.Item{}
	}
	return protocol.Response{ID: "resp_envtest", Object: protocol.ObjectResponse, CreatedAt: 1767225600,
		Model: "envtest", Output: items, ParallelToolCalls: true,
		ToolChoice: protocol.ToolChoice{Mode: protocol.ToolChoiceAuto}, Tools: []protocol.Tool{},
		Status: protocol.ResponseCompleted}
}

// Verify returns the verify request of row with the model's episode
// resp.
func Verify(row protocol.RunRequest, resp protocol.Response) protocol.VerifyRequest {
	return protocol.VerifyRequest{RunRequest: row, Response: resp}
}

// A Session is one rollout's calls to an environment: each call sends the
// session cookie the previous answer set. A Session is safe for use by
// one goroutine at a time.
type Session struct {
	t       testing.TB
	base    string
	client  *http.Client
	mu      sync.Mutex
	cookies []*http.Cookie
}

// NewSession returns a session with no cookie yet against the server at
// base.
func NewSession(t testing.TB, base string) *Session {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &Session{t: t, base: base, client: &http.Client{Transport: tr}}
}

// Post sends body (a string or json.RawMessage as it is, anything else
// encoded as JSON) to path with the session's cookie and returns the
// status and the answer's body. It fails the test when the answer sets
// no cookie: every answer of a NeMo Gym server must set it.
func (s *Session) Post(path string, body any) (int, []byte) {
	s.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case json.RawMessage:
		raw = b
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			s.t.Fatalf("envtest: encode %s body: %v", path, err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(raw))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	s.mu.Lock()
	for _, c := range s.cookies {
		req.AddCookie(c)
	}
	s.mu.Unlock()
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("envtest: POST %s: %v", path, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("envtest: POST %s: reading the answer: %v", path, err)
	}
	set := res.Cookies()
	if len(set) == 0 {
		s.t.Errorf("envtest: POST %s answered %d without setting the session cookie", path, res.StatusCode)
	} else {
		s.mu.Lock()
		s.cookies = s.cookies[:0]
		for _, c := range set {
			s.cookies = append(s.cookies, &http.Cookie{Name: c.Name, Value: c.Value})
		}
		s.mu.Unlock()
	}
	return res.StatusCode, out
}

// Cookie returns the value of the session cookie, "" before the first
// answer.
func (s *Session) Cookie() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cookies) == 0 {
		return ""
	}
	return s.cookies[0].Value
}

// Members decodes a JSON object into its members, failing t when raw is
// not one.
func Members(t testing.TB, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		t.Fatalf("envtest: not a JSON object: %v: %s", err, raw)
	}
	return m
}
