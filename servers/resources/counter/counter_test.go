package counter_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/resources/counter"
)

// TestMain fails the package when a test leaves a server or a client
// connection behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T) string {
	t.Helper()
	env, err := counter.New(counter.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	return envtest.Serve(t, env)
}

// call posts body to path on s and checks the answer.
func call(t *testing.T, s *envtest.Session, path string, body any, wantStatus int, want string) []byte {
	t.Helper()
	status, raw := s.Post(path, body)
	if status != wantStatus || (want != "" && !sameJSON(raw, want)) {
		t.Fatalf("POST %s: %d %s; want %d %s", path, status, raw, wantStatus, want)
	}
	return raw
}

func sameJSON(raw []byte, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && equal(a, b)
}

func equal(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func reward(t *testing.T, raw []byte) string {
	t.Helper()
	return string(envtest.Members(t, raw)["reward"])
}

// verifyBody is the verify request of a row expecting count.
func verifyBody(expected any) protocol.VerifyRequest {
	row := envtest.Row("add 1 then add 2 then get the count", map[string]any{"expected_count": expected})
	return envtest.Verify(row, envtest.Answer("The count is 6."))
}

func TestCounterSession(t *testing.T) {
	base := start(t)
	s := envtest.NewSession(t, base)
	call(t, s, "/seed_session", envtest.Row("add 1 then add 2 then get the count", map[string]any{"initial_count": 3}), 200, `{}`)
	call(t, s, "/increment_counter", `{"count":1}`, 200, `{"success":true}`)
	call(t, s, "/increment_counter", `{"count":2}`, 200, `{"success":true}`)
	call(t, s, "/get_counter_value", `{}`, 200, `{"count":6}`)
	if raw := call(t, s, "/verify", verifyBody(6), 200, ""); reward(t, raw) != "1" {
		t.Errorf("verify against 6: %s", raw)
	}
	if raw := call(t, s, "/verify", verifyBody(7), 200, ""); reward(t, raw) != "0" {
		t.Errorf("verify against 7: %s", raw)
	}
	// The counter belongs to the session: another rollout has none.
	other := envtest.NewSession(t, base)
	if raw := call(t, other, "/verify", verifyBody(0), 200, ""); reward(t, raw) != "0" {
		t.Errorf("verify without a session: %s", raw)
	}
	// As upstream, a tool call without a seed starts the counter at 0.
	fresh := envtest.NewSession(t, base)
	call(t, fresh, "/increment_counter", `{"count":-4}`, 200, `{"success":true}`)
	call(t, fresh, "/get_counter_value", `{"ignored":true}`, 200, `{"count":-4}`)
	if raw := call(t, fresh, "/verify", verifyBody(-4), 200, ""); reward(t, raw) != "1" {
		t.Errorf("verify of an unseeded counter: %s", raw)
	}
	// Seeding again restarts the counter.
	call(t, s, "/seed_session", `{"initial_count":10}`, 200, `{}`)
	call(t, s, "/get_counter_value", `{}`, 200, `{"count":10}`)
}

func TestCounterRefusesBadBodies(t *testing.T) {
	base := start(t)
	s := envtest.NewSession(t, base)
	for _, c := range []struct {
		path string
		body any
		loc  string
	}{
		{"/seed_session", `{"responses_create_params":{"input":"x"}}`, `["body","initial_count"]`},
		{"/seed_session", `{"initial_count":"3"}`, `["body","initial_count"]`},
		{"/increment_counter", `{}`, `["body","count"]`},
		{"/increment_counter", `{"count":1.5}`, `["body","count"]`},
		{"/verify", verifyBody("6"), `["body","expected_count"]`},
		{"/verify", envtest.Verify(envtest.Row("q", nil), envtest.Answer("x")), `["body","expected_count"]`},
	} {
		status, raw := s.Post(c.path, c.body)
		var b struct {
			Detail []struct{ Loc json.RawMessage }
		}
		_ = json.Unmarshal(raw, &b)
		if status != http.StatusUnprocessableEntity || len(b.Detail) != 1 || string(b.Detail[0].Loc) != c.loc {
			t.Errorf("POST %s %v: %d %s; want 422 at %s", c.path, c.body, status, raw, c.loc)
		}
	}
}

func TestTools(t *testing.T) {
	raw, err := json.Marshal(counter.Tools())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"function","name":"increment_counter","description":"Add count to the counter of this session.",` +
		`"parameters":{"type":"object","properties":{"count":{"type":"integer","description":"How much to add to the counter."}},` +
		`"required":["count"],"additionalProperties":false},"strict":true},` +
		`{"type":"function","name":"get_counter_value","description":"Return the current value of the counter of this session.",` +
		`"parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false},"strict":true}]`
	if string(raw) != want {
		t.Errorf("Tools:\n got %s\nwant %s", raw, want)
	}
}

// addRE is how the built-in offline policy reads the plan: one
// increment per "add N", case-insensitive, in order.
var addRE = regexp.MustCompile(`(?i)\badd\s+(-?\d+)`)

// TestRowDrivesARollout plays the rollout the built-in agent and offline
// policy make of a Row: seed with the whole row, one increment_counter per
// "add N", get_counter_value, then verify the row with the episode.
func TestRowDrivesARollout(t *testing.T) {
	base := start(t)
	for _, c := range []struct {
		initial int
		adds    []int
		prompt  string
	}{
		{3, []int{1, 2}, "add 1 then add 2 then get the count"},
		{0, nil, "get the count"},
		{9, []int{7, 8, 20}, "add 7 then add 8 then add 20 then get the count"},
	} {
		row := counter.Row(c.initial, c.adds...)
		if err := row.Validate(); err != nil {
			t.Fatalf("Row(%d, %v) does not validate: %v", c.initial, c.adds, err)
		}
		prompt := row.ResponsesCreateParams.Input.LastUserText()
		if prompt != c.prompt {
			t.Errorf("Row(%d, %v) prompt %q, want %q", c.initial, c.adds, prompt, c.prompt)
		}
		tools, _ := json.Marshal(row.ResponsesCreateParams.Tools)
		if want, _ := json.Marshal(counter.Tools()); string(tools) != string(want) {
			t.Errorf("Row lists tools %s", tools)
		}
		s := envtest.NewSession(t, base)
		call(t, s, "/seed_session", row, 200, `{}`)
		var items []protocol.Item
		for i, m := range addRE.FindAllStringSubmatch(prompt, -1) {
			n, _ := strconv.Atoi(m[1])
			args, _ := json.Marshal(counter.IncrementArgs{Count: n})
			out := call(t, s, "/increment_counter", json.RawMessage(args), 200, `{"success":true}`)
			id := "call_" + strconv.Itoa(i)
			items = append(items, protocol.FunctionCall("fc_"+id, id, counter.ToolIncrement, string(args)),
				protocol.FunctionCallOutput(id, string(out)))
		}
		out := call(t, s, "/get_counter_value", `{}`, 200, "")
		var got counter.GetResult
		_ = json.Unmarshal(out, &got)
		items = append(items, protocol.FunctionCall("fc_get", "call_get", counter.ToolGet, "{}"),
			protocol.FunctionCallOutput("call_get", string(out)),
			protocol.AssistantMessage("msg_1", "The count is "+strconv.Itoa(got.Count)+"."))
		raw := call(t, s, "/verify", envtest.Verify(row, envtest.Response(items...)), 200, "")
		m := envtest.Members(t, raw)
		if string(m["reward"]) != "1" || string(m["initial_count"]) != strconv.Itoa(c.initial) {
			t.Errorf("Row(%d, %v): verify %s; want reward 1 with the row echoed", c.initial, c.adds, raw)
		}
	}
}

// Parallel calls on one session are serialized: none is lost.
func TestConcurrentIncrements(t *testing.T) {
	base := start(t)
	s := envtest.NewSession(t, base)
	call(t, s, "/seed_session", `{"initial_count":0}`, 200, `{}`)
	cookie := s.Cookie()
	c := server.NewClient(server.ClientOptions{Retries: -1})
	defer c.CloseIdleConnections()
	var wg sync.WaitGroup
	const n = 40
	for range n {
		wg.Go(func() {
			_, err := c.Post(t.Context(), base+"/increment_counter", counter.IncrementArgs{Count: 1}, nil,
				server.Call{Cookies: []*http.Cookie{{Name: "counter___" + envtest.Instance, Value: cookie}}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	call(t, s, "/get_counter_value", `{}`, 200, `{"count":40}`)
}

func TestDefaultsAreValid(t *testing.T) {
	if err := counter.Defaults().Validate(); err != nil {
		t.Error(err)
	}
}
