package environment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// TestMain fails the package when a test leaves a server, a client
// connection or a telemetry goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exactTask is the task of the test environment: one required member, one
// optional, and a rule Validate enforces.
type exactTask struct {
	Expected string `json:"expected_answer" gym:"required"`
	Fold     *bool  `json:"fold"`
}

// Validate refuses the expected answer "refused", located at its member.
func (t *exactTask) Validate() error {
	if t.Expected == "refused" {
		return &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrValue,
			Loc: []any{"expected_answer"}, Msg: "Value error, refused", Input: json.RawMessage(`"refused"`)}}}
	}
	return nil
}

// exactEnv scores 1 when the output text equals the expected answer
// (case-folded with fold). Answers steer faults: "panic" panics, "error"
// fails, "nan" scores NaN, "teapot" answers 418. calls counts the calls
// of the verify function.
func exactEnv(calls *atomic.Int64, opts ...environment.Option) *environment.Environment {
	return environment.New("exact_match", environment.Verify(
		func(ctx context.Context, req *protocol.VerifyRequest, task exactTask) (environment.Score, error) {
			calls.Add(1)
			got := req.Response.OutputText()
			switch got {
			case "panic":
				panic("injected fault")
			case "error":
				return environment.Score{}, errors.New("verifier failed")
			case "nan":
				return environment.Score{Reward: math.NaN()}, nil
			case "teapot":
				return environment.Score{}, environment.Errorf(http.StatusTeapot, "short and stout")
			}
			cmp, want := got, task.Expected
			if task.Fold != nil && *task.Fold {
				cmp, want = strings.ToLower(cmp), strings.ToLower(want)
			}
			reward := 0.0
			if cmp == want {
				reward = 1
			}
			return environment.Score{Reward: reward}.With("extracted_answer", got), nil
		}), opts...)
}

// quiet is a logger for servers whose injected panics would fill the
// test log with stacks.
var quiet = slog.New(slog.DiscardHandler)

// start serves env on loopback as instance "test" and returns its base
// URL and a stop function.
func start(t *testing.T, env *environment.Environment) (string, func()) {
	t.Helper()
	opts := environment.ServerOptions(env.Name(), "test")
	opts.Name, opts.Logger = env.Name(), quiet
	s := server.New(opts)
	env.Register(s)
	return servertest.Start(t, s)
}

// responseJSON is a valid model response whose one message says text.
func responseJSON(text string) string {
	t, _ := json.Marshal(text)
	return `{"id":"resp_1","object":"response","created_at":1767225600,"model":"m","output":[` +
		`{"type":"message","id":"msg_1","role":"assistant","status":"completed",` +
		`"content":[{"type":"output_text","text":` + string(t) + `,"annotations":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}`
}

// verifyBody is a verify request: a row with the given extra members
// (a JSON object's inside, may be empty) and a response saying answer.
func verifyBody(members, answer string) string {
	if members != "" {
		members += ","
	}
	return `{"responses_create_params":{"input":[{"role":"user","content":"Capital of France?"}]},` +
		members + `"response":` + responseJSON(answer) + `}`
}

// members decodes a JSON object into its members.
func members(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, raw)
	}
	return m
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestVerifyDecodesTheTaskAndEchoesEveryMember(t *testing.T) {
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	row := `"expected_answer":"PARIS","fold":true,"undeclared":{"deep":[1,"two",null]},"nothing":null,` +
		`"_ng_task_index":3,"_ng_rollout_index":1,"agent_ref":{"type":"responses_api_agents","name":"a"},` +
		`"extracted_answer":"stale","reward":0.25`
	body := verifyBody(row, "Paris")
	status, raw := servertest.PostRaw(t, base+"/verify", body)
	if status != http.StatusOK {
		t.Fatalf("verify: %d %s", status, raw)
	}
	got := members(t, raw)
	sent := members(t, []byte(body))
	for k, v := range sent {
		switch k {
		case "extracted_answer", "reward":
			continue // the verifier's own members, below
		}
		if !sameJSON(got[k], v) {
			t.Errorf("member %s echoed as %s, sent %s", k, got[k], v)
		}
	}
	if string(got["nothing"]) != "null" {
		t.Errorf("a null member came back as %s", got["nothing"])
	}
	if string(got["reward"]) != "1" || string(got["extracted_answer"]) != `"Paris"` {
		t.Errorf("reward %s, extracted_answer %s; want 1 and \"Paris\"", got["reward"], got["extracted_answer"])
	}
	// Upstream's verify response always carries these three, with these
	// defaults when the verifier sets none.
	for k, want := range map[string]string{"mask_sample": "false", "failure_kind": "null", "failure_reason": "null"} {
		if string(got[k]) != want {
			t.Errorf("member %s = %s, want %s", k, got[k], want)
		}
	}
	if len(got) != len(sent)+3 {
		t.Errorf("response has %d members, the request %d (+3 of upstream's verify response): %s", len(got), len(sent), raw)
	}
	// An optional member may be absent; the fold then does not apply.
	_, raw = servertest.PostRaw(t, base+"/verify", verifyBody(`"expected_answer":"PARIS"`, "Paris"))
	if m := members(t, raw); string(m["reward"]) != "0" {
		t.Errorf("without fold: reward %s, want 0", m["reward"])
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("verify function called %d times, want 2", n)
	}
}

// detail is one entry of a 422 body.
type detail struct {
	Type  string          `json:"type"`
	Loc   []any           `json:"loc"`
	Msg   string          `json:"msg"`
	Input json.RawMessage `json:"input"`
}

// post422 posts body and returns the entries of the 422 it must get.
func post422(t *testing.T, url, body string) []detail {
	t.Helper()
	status, raw := servertest.PostRaw(t, url, body)
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("%.120s: status %d (%s), want 422", body, status, raw)
	}
	servertest.CheckErrorBody(t, status, raw)
	var b struct{ Detail []detail }
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	return b.Detail
}

func loc(d detail) string {
	parts := make([]string, len(d.Loc))
	for i, p := range d.Loc {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
}

func TestVerifyRefusesWhatUpstreamRefuses(t *testing.T) {
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	url := base + "/verify"
	for _, c := range []struct {
		name, body      string
		typ, loc, input string // first entry; input "" is not checked
		entries         int
	}{
		{"forbidden parameter",
			`{"responses_create_params":{"input":"hi","frequency_penalty":"k"},"expected_answer":"a","response":` + responseJSON("a") + `}`,
			protocol.ErrExtraForbidden, "body.responses_create_params.frequency_penalty", `"k"`, 1},
		{"missing response",
			`{"responses_create_params":{"input":"hi"},"expected_answer":"a"}`,
			protocol.ErrMissing, "body.response", "", 1},
		{"response without id",
			`{"responses_create_params":{"input":"hi"},"expected_answer":"a","response":` +
				strings.Replace(responseJSON("a"), `"id":"resp_1",`, "", 1) + `}`,
			protocol.ErrMissing, "body.response.id", "", 1},
		{"missing task member", verifyBody(`"fold":true`, "a"), protocol.ErrMissing, "body.expected_answer", "", 1},
		{"task member of the wrong type", verifyBody(`"expected_answer":7`, "a"), protocol.ErrString, "body.expected_answer", "7", 1},
		{"required task member null", verifyBody(`"expected_answer":null`, "a"), protocol.ErrString, "body.expected_answer", "null", 1},
		{"two bad members", verifyBody(`"expected_answer":[],"fold":"yes"`, "a"), protocol.ErrString, "body.expected_answer", "[]", 2},
		{"refused by Validate", verifyBody(`"expected_answer":"refused"`, "a"), protocol.ErrValue, "body.expected_answer", `"refused"`, 1},
		{"not an object", `[1,2]`, "", "body", "", 1},
		{"malformed JSON", `{"responses_create_params":`, protocol.ErrJSONInvalid, "", "", 1},
	} {
		d := post422(t, url, c.body)
		if len(d) != c.entries {
			t.Errorf("%s: %d entries %+v, want %d", c.name, len(d), d, c.entries)
			continue
		}
		if c.typ != "" && d[0].Type != c.typ {
			t.Errorf("%s: type %q, want %q", c.name, d[0].Type, c.typ)
		}
		if c.loc != "" && loc(d[0]) != c.loc {
			t.Errorf("%s: loc %s, want %s", c.name, loc(d[0]), c.loc)
		}
		if c.input != "" && string(d[0].Input) != c.input {
			t.Errorf("%s: input %s, want %s", c.name, d[0].Input, c.input)
		}
		if c.name == "two bad members" && (loc(d[1]) != "body.fold" || d[1].Type != protocol.ErrBool) {
			t.Errorf("second entry %+v, want a bool_type at body.fold", d[1])
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the verify function ran %d times for refused requests", n)
	}
}

func TestVerifyErrors(t *testing.T) {
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	url := base + "/verify"
	for _, c := range []struct {
		answer string
		status int
		says   string
	}{
		{"error", http.StatusInternalServerError, "verifier failed"},
		{"panic", http.StatusInternalServerError, "panicked"},
		{"nan", http.StatusInternalServerError, "not a finite number"},
		{"teapot", http.StatusTeapot, "short and stout"},
	} {
		status, raw := servertest.PostRaw(t, url, verifyBody(`"expected_answer":"a"`, c.answer))
		if status != c.status || !strings.Contains(string(raw), c.says) {
			t.Errorf("answer %q: %d %s; want %d saying %q", c.answer, status, raw, c.status, c.says)
		}
		servertest.CheckErrorBody(t, status, raw)
	}
	// The process serves on after a panic.
	if status, raw := servertest.PostRaw(t, url, verifyBody(`"expected_answer":"a"`, "a")); status != http.StatusOK {
		t.Fatalf("after a panic: %d %s", status, raw)
	}
}

func TestScoreMembers(t *testing.T) {
	env := environment.New("scored", environment.Verify(
		func(_ context.Context, req *protocol.VerifyRequest, _ struct{}) (environment.Score, error) {
			s := environment.Score{Reward: 0.5}.WithFields(map[string]any{"b": 2, "a": []int{1}, "expected_answer": "new"})
			switch req.Response.OutputText() {
			case "reserved":
				s = s.With("reward", 1)
			case "unencodable":
				s = s.With("c", func() {})
			}
			return s, nil
		}))
	base, _ := start(t, env)
	status, raw := servertest.PostRaw(t, base+"/verify", verifyBody(`"expected_answer":"old","z":true`, "fine"))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	// Members come in order: the row's declared members, the reward and
	// upstream's three verify-response members, the row's other members (a
	// task member replaced in place), then the score's own members in key
	// order.
	want := `"reward":0.5,"mask_sample":false,"failure_kind":null,"failure_reason":null,"expected_answer":"new","z":true,"a":[1],"b":2}`
	if !bytes.HasSuffix(bytes.TrimSpace(raw), []byte(want)) {
		t.Errorf("response %s; want it to end with %s", raw, want)
	}
	for _, answer := range []string{"reserved", "unencodable"} {
		if status, raw := servertest.PostRaw(t, base+"/verify", verifyBody("", answer)); status != http.StatusInternalServerError {
			t.Errorf("score %s: %d %s, want 500", answer, status, raw)
		}
	}
}

func TestReverifyMode(t *testing.T) {
	var calls atomic.Int64
	for _, c := range []struct {
		opts []environment.Option
		want string
	}{
		{nil, `"unknown"`},
		{[]environment.Option{environment.ReverifyMode(protocol.ReverifyStateless)}, `"stateless"`},
	} {
		base, _ := start(t, exactEnv(&calls, c.opts...))
		res, err := http.Get(base + "/reverify_mode")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || buf.String() != c.want || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET /reverify_mode: %d %q %s; want 200 %s as JSON", res.StatusCode, res.Header.Get("Content-Type"), buf.String(), c.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("ReverifyMode accepted an unknown mode")
		}
	}()
	environment.ReverifyMode("sometimes")
}

func TestRoutesWithoutSeedOrTools(t *testing.T) {
	var calls atomic.Int64
	base, _ := start(t, exactEnv(&calls))
	// Upstream's base seed_session takes any object and answers {}.
	for _, body := range []string{`{}`, `{"responses_create_params":{"input":"x"},"anything":[1]}`} {
		if status, raw := servertest.PostRaw(t, base+"/seed_session", body); status != http.StatusOK || string(bytes.TrimSpace(raw)) != `{}` {
			t.Errorf("seed_session %s: %d %s, want 200 {}", body, status, raw)
		}
	}
	if status, raw := servertest.PostRaw(t, base+"/seed_session", `"x"`); status != http.StatusUnprocessableEntity {
		t.Errorf("seed_session with a string: %d %s, want 422", status, raw)
	}
	status, raw := servertest.PostRaw(t, base+"/no_such_tool", `{}`)
	if status != http.StatusNotFound || !sameJSON(raw, []byte(`{"detail":"Not Found"}`)) {
		t.Errorf("unknown route: %d %s", status, raw)
	}
	res, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /: %d", res.StatusCode)
	}
}

func TestNewPanicsOnBadDefinitions(t *testing.T) {
	verify := environment.Verify(func(context.Context, *protocol.VerifyRequest, struct{}) (environment.Score, error) {
		return environment.Score{}, nil
	})
	noop := func(context.Context, struct{}) (int, error) { return 0, nil }
	for name, build := range map[string]func(){
		"empty name":    func() { environment.New("", verify) },
		"zero Verifier": func() { environment.New("x", environment.Verifier{}) },
		"nil verify":    func() { environment.Verify[struct{}](nil) },
		"reserved tool": func() { environment.New("x", verify, environment.Tool("verify", "", noop)) },
		"bad tool name": func() { environment.New("x", verify, environment.Tool("a/b", "", noop)) },
		"repeated tool": func() { environment.New("x", verify, environment.Tool("t", "", noop), environment.Tool("t", "", noop)) },
		"scalar args": func() {
			environment.New("x", verify, environment.Tool("t", "", func(context.Context, int) (int, error) { return 0, nil }))
		},
		"bad parameters": func() {
			environment.New("x", verify, environment.Tool("t", "", noop, environment.Parameters(json.RawMessage(`[]`))))
		},
		"unknown reverify mode": func() { environment.ReverifyMode("sometimes") },
		"Register on nil":       func() { environment.New("x", verify).Register(nil) },
		"Register on a serving server": func() {
			s := server.New(environment.ServerOptions("x", ""))
			s.Handler()
			environment.New("x", verify).Register(s)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			build()
		}()
	}
}

func TestServerOptions(t *testing.T) {
	got := environment.ServerOptions("exact_match", "prod_1")
	if got.SessionCookie != "exact_match___prod_1" || got.RolloutPrefix != server.PrefixResources || got.Type != contract.ServerTypeResources {
		t.Errorf("ServerOptions(exact_match, prod_1) = %+v", got)
	}
	if c := environment.ServerOptions("exact_match", "").SessionCookie; c != "exact_match___exact_match" {
		t.Errorf("ServerOptions(exact_match, \"\") cookie %q", c)
	}
}
