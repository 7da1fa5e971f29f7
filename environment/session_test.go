package environment_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// The tally environment: a session holds a running total, seeded with
// "start"; the tool add adds to it, the tool total reads it, and verify
// compares it with "expected_total".
type (
	tally struct {
		Total, Calls int
	}
	tallySeed struct {
		Start int `json:"start" gym:"required"`
	}
	addArgs struct {
		N    int    `json:"n" gym:"required" description:"how much to add"`
		Note string `json:"note"`
	}
	tallyTask struct {
		Total int `json:"expected_total" gym:"required"`
	}
)

func tallyEnv(store *environment.Sessions[tally]) *environment.Environment {
	return environment.New("tally",
		environment.Verify(func(ctx context.Context, _ *protocol.VerifyRequest, task tallyTask) (environment.Score, error) {
			st, ok := store.Get(ctx)
			reward := 0.0
			if ok && st.Total == task.Total {
				reward = 1
			}
			return environment.Score{Reward: reward}.With("calls", st.Calls), nil
		}),
		environment.Seed(store, func(_ context.Context, _ *protocol.SeedSessionRequest, seed tallySeed) (tally, error) {
			return tally{Total: seed.Start}, nil
		}),
		environment.Tool("add", "Add n to the total.", func(ctx context.Context, args addArgs) (map[string]bool, error) {
			err := store.Update(ctx, func(st *tally, existed bool) error {
				if !existed {
					return environment.Errorf(http.StatusConflict, "no session: seed it first")
				}
				st.Total += args.N
				st.Calls++
				return nil
			})
			return map[string]bool{"success": err == nil}, err
		}),
		environment.Tool("total", "Read the total.", func(ctx context.Context, _ struct{}) (map[string]int, error) {
			st, _ := store.Get(ctx)
			return map[string]int{"total": st.Total}, nil
		}),
	)
}

// rollout is one session's calls through a fleet client, carrying the
// cookies of each answer to the next call, as upstream's agent does.
type rollout struct {
	t       *testing.T
	c       *server.Client
	base    string
	cookies []*http.Cookie
}

const tallyCookie = "tally___test"

// call posts body to path and returns the status and body; it checks
// that the answer set the session cookie, and that the cookie keeps its
// value along the session.
func (r *rollout) call(path, body string) (int, []byte) {
	r.t.Helper()
	var raw json.RawMessage
	reply, err := r.c.Post(context.Background(), r.base+path, json.RawMessage(body), &raw,
		server.Call{Cookies: r.cookies, AnyStatus: true})
	if err != nil {
		r.t.Fatalf("POST %s: %v", path, err)
	}
	var got *http.Cookie
	for _, c := range reply.Cookies {
		if c.Name == tallyCookie {
			got = c
		}
	}
	switch {
	case got == nil:
		r.t.Errorf("POST %s (%d): no %s cookie set; Set-Cookie %q", path, reply.Status, tallyCookie, reply.Header.Values("Set-Cookie"))
	case got.Path != "/" || got.Domain != "" || got.Secure || !got.HttpOnly || got.SameSite != http.SameSiteLaxMode:
		r.t.Errorf("POST %s: cookie %q; want Path=/, HttpOnly, SameSite=Lax, no Domain, not Secure", path, reply.Header.Values("Set-Cookie"))
	case len(r.cookies) > 0 && got.Value != r.cookies[0].Value:
		r.t.Errorf("POST %s: the session cookie changed from %s to %s", path, r.cookies[0].Value, got.Value)
	}
	if got != nil {
		r.cookies = []*http.Cookie{{Name: got.Name, Value: got.Value}}
	}
	return reply.Status, reply.Body
}

func newRollout(t *testing.T, base string) *rollout {
	return &rollout{t: t, c: servertest.Client(t), base: base}
}

// tallyVerify is a verify body expecting total.
func tallyVerify(total int) string {
	return verifyBody(`"expected_total":`+itoa(total), "done")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func reward(t *testing.T, raw []byte) string {
	t.Helper()
	return string(members(t, raw)["reward"])
}

func TestSessionStateFromSeedThroughToolsToVerify(t *testing.T) {
	store := &environment.Sessions[tally]{}
	base, _ := start(t, tallyEnv(store))

	a, b := newRollout(t, base), newRollout(t, base)
	for _, step := range []struct {
		r          *rollout
		path, body string
		want       string
	}{
		{a, "/seed_session", `{"responses_create_params":{"input":"x"},"start":3,"other":"kept out"}`, `{}`},
		{b, "/seed_session", `{"start":100}`, `{}`},
		{a, "/add", `{"n":1}`, `{"success":true}`},
		{b, "/add", `{"n":50,"note":"halfway"}`, `{"success":true}`},
		{a, "/add", `{"n":2,"unknown":"ignored"}`, `{"success":true}`},
		{a, "/total", `{}`, `{"total":6}`},
		{b, "/total", `{}`, `{"total":150}`},
	} {
		status, raw := step.r.call(step.path, step.body)
		if status != http.StatusOK || !sameJSON(raw, []byte(step.want)) {
			t.Fatalf("POST %s %s: %d %s; want 200 %s", step.path, step.body, status, raw, step.want)
		}
	}
	status, raw := a.call("/verify", tallyVerify(6))
	if status != http.StatusOK || reward(t, raw) != "1" || string(members(t, raw)["calls"]) != "2" {
		t.Fatalf("verify a: %d %s; want reward 1 after 2 calls", status, raw)
	}
	if _, raw := b.call("/verify", tallyVerify(6)); reward(t, raw) != "0" {
		t.Errorf("verify b against a's total: %s; want reward 0", raw)
	}
	if store.Len() != 2 {
		t.Errorf("store holds %d sessions, want 2", store.Len())
	}

	// Without a seeded session: verify scores 0, the tool refuses (the
	// refusal is the tool's output), and errors carry the cookie too.
	c := newRollout(t, base)
	if status, raw := c.call("/verify", tallyVerify(0)); status != http.StatusOK || reward(t, raw) != "0" {
		t.Errorf("verify without a session: %d %s; want 200, reward 0", status, raw)
	}
	if status, raw := c.call("/add", `{"n":1}`); status != http.StatusConflict || !sameJSON(raw, []byte(`{"detail":"no session: seed it first"}`)) {
		t.Errorf("add without a session: %d %s; want 409 with the detail", status, raw)
	}
	if status, _ := c.call("/seed_session", `{"start":"three"}`); status != http.StatusUnprocessableEntity {
		t.Errorf("seed with a bad start: %d, want 422", status)
	}
	if status, _ := c.call("/nowhere", `{}`); status != http.StatusNotFound {
		t.Errorf("unknown route: %d, want 404", status)
	}
	if _, ok := func() (tally, bool) { return store.Get(context.Background()) }(); ok {
		t.Error("Get outside a request found a session")
	}
	if err := store.Set(context.Background(), tally{}); err != environment.ErrNoSession {
		t.Errorf("Set outside a request: %v, want ErrNoSession", err)
	}
}

func TestToolArguments(t *testing.T) {
	base, _ := start(t, tallyEnv(&environment.Sessions[tally]{}))
	url := base + "/add"
	for _, c := range []struct {
		name, body, typ, loc, input string
	}{
		{"wrong type", `{"n":"x"}`, protocol.ErrInt, "body.n", `"x"`},
		{"not an integer", `{"n":1.5}`, protocol.ErrInt, "body.n", `1.5`},
		{"missing", `{"note":"no n"}`, protocol.ErrMissing, "body.n", ""},
		{"null", `{"n":null}`, protocol.ErrInt, "body.n", "null"},
		{"optional of the wrong type", `{"n":1,"note":5}`, protocol.ErrString, "body.note", "5"},
		{"a list", `[1]`, protocol.ErrDict, "body", ""},
	} {
		d := post422(t, url, c.body)
		if d[0].Type != c.typ || loc(d[0]) != c.loc || (c.input != "" && string(d[0].Input) != c.input) {
			t.Errorf("%s: %+v; want %s at %s with input %s", c.name, d[0], c.typ, c.loc, c.input)
		}
	}
}

func TestToolDefinitions(t *testing.T) {
	env := tallyEnv(&environment.Sessions[tally]{})
	raw, err := json.Marshal(env.Tools())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"function","name":"add","description":"Add n to the total.",` +
		`"parameters":{"type":"object","properties":{"n":{"type":"integer","description":"how much to add"},"note":{"type":"string"}},` +
		`"required":["n"],"additionalProperties":false},"strict":false},` +
		`{"type":"function","name":"total","description":"Read the total.",` +
		`"parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false},"strict":true}]`
	if string(raw) != want {
		t.Errorf("Tools():\n got %s\nwant %s", raw, want)
	}
	// The definitions validate as request tools, so datasets can list them.
	params := protocol.ResponseCreateParams{Input: protocol.TextInput("x"), Tools: env.Tools()}
	row := protocol.RunRequest{ResponsesCreateParams: params}
	if err := row.Validate(); err != nil {
		t.Errorf("a row listing the tools does not validate: %v", err)
	}
	// Tools returns copies.
	env.Tools()[0].Parameters[0] = 'X'
	*env.Tools()[0].Strict = true
	if again, _ := json.Marshal(env.Tools()); string(again) != want {
		t.Errorf("changing Tools()'s result changed the environment: %s", again)
	}
}

// rich exercises every schema rule.
type rich struct {
	Embedded
	Name   string             `json:"name" gym:"required"`
	Tags   []string           `json:"tags,omitempty" gym:"required"`
	Point  *point             `json:"point" gym:"required" description:"where"`
	Scores map[string]float64 `json:"scores"`
	Any    any                `json:"any" gym:"required"`
	Raw    json.RawMessage    `json:"raw" gym:"required"`
	Num    json.Number        `json:"num" gym:"required"`
	Blob   []byte             `json:"blob" gym:"required"`
	Skip   int                `json:"-"`
	hidden int
}

type Embedded struct {
	Depth uint8 `json:"depth" gym:"required"`
}

type point struct {
	X, Y float64 `gym:"required"`
	Next *point  `json:"next" gym:"required"`
}

func TestToolSchemaDerivation(t *testing.T) {
	verify := environment.Verify(func(context.Context, *protocol.VerifyRequest, struct{}) (environment.Score, error) {
		return environment.Score{}, nil
	})
	noop := func(context.Context, rich) (struct{}, error) { return struct{}{}, nil }
	flat := func(context.Context, point) (struct{}, error) { return struct{}{}, nil }
	env := environment.New("schemas", verify,
		environment.Tool("rich", "", noop),
		environment.Tool("flat", "", flat),
		environment.Tool("given", "", flat, environment.Parameters(json.RawMessage(`{"type":"object"}`))),
		environment.Tool("given_strict", "", flat, environment.Strict(true), environment.Parameters(json.RawMessage(`{"type":"object"}`))),
		environment.Tool("loose", "", flat, environment.Strict(false)),
	)
	tools := env.Tools()
	wantRich := `{"type":"object","properties":{` +
		`"depth":{"type":"integer"},"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}},` +
		`"point":{"type":"object","properties":{"X":{"type":"number"},"Y":{"type":"number"},"next":{}},` +
		`"required":["X","Y","next"],"additionalProperties":false,"description":"where"},` +
		`"scores":{"type":"object","additionalProperties":{"type":"number"}},` +
		`"any":{},"raw":{},"num":{"type":"number"},"blob":{"type":"string"}},` +
		`"required":["depth","name","tags","point","any","raw","num","blob"],"additionalProperties":false}`
	if got := string(tools[0].Parameters); got != wantRich {
		t.Errorf("rich schema:\n got %s\nwant %s", got, wantRich)
	}
	// Optional members, maps, free-form values and recursion (point's
	// next, cut at its second appearance) all make a schema non-strict;
	// Strict overrides, whatever the order of the options.
	for i, want := range []bool{false, false, false, true, false} {
		if *tools[i].Strict != want {
			t.Errorf("tool %s: strict %v, want %v", tools[i].Name, *tools[i].Strict, want)
		}
	}
	if string(tools[2].Parameters) != `{"type":"object"}` {
		t.Errorf("given parameters: %s", tools[2].Parameters)
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestSessionEviction(t *testing.T) {
	clock := &fakeClock{}
	clock.advance(time.Hour)
	store := &environment.Sessions[tally]{TTL: time.Minute, MaxSessions: 2}
	environment.SetClock(store, clock.now)
	base, _ := start(t, tallyEnv(store))

	seed := func(start int) *rollout {
		r := newRollout(t, base)
		if status, raw := r.call("/seed_session", `{"start":`+itoa(start)+`}`); status != http.StatusOK {
			t.Fatalf("seed: %d %s", status, raw)
		}
		return r
	}
	alive := func(r *rollout, total int) bool {
		_, raw := r.call("/verify", tallyVerify(total))
		return reward(t, raw) == "1"
	}

	a := seed(1)
	b := seed(2)
	clock.advance(10 * time.Second)
	if !alive(a, 1) { // a is now the most recently used
		t.Fatal("a fresh session is gone")
	}
	c := seed(3) // beyond the cap: b, the least recently used, goes
	if alive(b, 2) {
		t.Error("the least recently used session survived the cap")
	}
	if !alive(a, 1) || !alive(c, 3) || store.Len() != 2 {
		t.Fatalf("after the cap: a %v, c %v, %d sessions; want both alive, 2", alive(a, 1), alive(c, 3), store.Len())
	}

	// Use keeps a session alive; idleness past the TTL drops it.
	clock.advance(40 * time.Second)
	if status, raw := a.call("/total", `{}`); status != http.StatusOK || !strings.Contains(string(raw), `"total":1`) {
		t.Fatalf("total of a: %d %s", status, raw)
	}
	clock.advance(40 * time.Second) // a idle 40 s, c idle 80 s
	if store.Len() != 1 {
		t.Errorf("%d live sessions, want 1", store.Len())
	}
	if alive(c, 3) {
		t.Error("a session idle past the TTL survived")
	}
	if !alive(a, 1) {
		t.Error("a session used within the TTL was dropped")
	}
	// A dropped session reads as never seeded: tools refuse it.
	if status, _ := c.call("/add", `{"n":1}`); status != http.StatusConflict {
		t.Errorf("add on a dropped session: %d, want 409", status)
	}
	clock.advance(2 * time.Minute)
	if store.Len() != 0 {
		t.Errorf("%d live sessions after everything expired", store.Len())
	}
}
