package counter

import (
	"context"
	"fmt"
	"strings"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// ServerName is the name of this environment: its implementation name in
// a fleet configuration.
const ServerName = "counter"

// Tool names and the members of the rows and bodies they use.
const (
	ToolIncrement = "increment_counter"
	ToolGet       = "get_counter_value"

	FieldInitialCount  = "initial_count"
	FieldExpectedCount = "expected_count"
)

// Config configures the counter environment. Upstream's has no settings;
// the zero value is the only configuration.
type Config struct{}

// Defaults returns the default configuration.
func Defaults() Config { return Config{} }

// Validate reports a configuration the environment cannot run with; every
// Config is valid.
func (Config) Validate() error { return nil }

// seedFields is what /seed_session reads from the row.
type seedFields struct {
	InitialCount int `json:"initial_count" gym:"required"`
}

// task is what /verify reads from the row.
type task struct {
	ExpectedCount int `json:"expected_count" gym:"required"`
}

// IncrementArgs are the arguments of increment_counter.
type IncrementArgs struct {
	Count int `json:"count" gym:"required" description:"How much to add to the counter."`
}

// IncrementResult is the answer of increment_counter.
type IncrementResult struct {
	Success bool `json:"success"`
}

// GetArgs are the arguments of get_counter_value: none.
type GetArgs struct{}

// GetResult is the answer of get_counter_value.
type GetResult struct {
	Count int `json:"count"`
}

// New returns the counter environment, with a session store of its own.
func New(cfg Config) (*environment.Environment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sessions := &environment.Sessions[int]{}
	verify := func(ctx context.Context, _ *protocol.VerifyRequest, t task) (environment.Score, error) {
		count, ok := sessions.Get(ctx)
		if ok && count == t.ExpectedCount {
			return environment.Score{Reward: 1}, nil
		}
		return environment.Score{Reward: 0}, nil
	}
	seed := func(_ context.Context, _ *protocol.SeedSessionRequest, s seedFields) (int, error) {
		return s.InitialCount, nil
	}
	increment := func(ctx context.Context, args IncrementArgs) (IncrementResult, error) {
		err := sessions.Update(ctx, func(count *int, _ bool) error {
			*count += args.Count
			return nil
		})
		return IncrementResult{Success: err == nil}, err
	}
	get := func(ctx context.Context, _ GetArgs) (GetResult, error) {
		var count int
		err := sessions.Update(ctx, func(c *int, _ bool) error {
			count = *c
			return nil
		})
		return GetResult{Count: count}, err
	}
	return environment.New(ServerName, environment.Verify(verify),
		environment.Seed(sessions, seed),
		environment.Tool(ToolIncrement, "Add count to the counter of this session.", increment),
		environment.Tool(ToolGet, "Return the current value of the counter of this session.", get),
	), nil
}

// Tools returns the definitions of increment_counter and
// get_counter_value, for a row's responses_create_params.tools: strict
// function tools whose parameters are {"count": integer} (required) and
// nothing.
func Tools() []protocol.Tool {
	env, _ := New(Defaults())
	return env.Tools()
}

// Row returns a dataset row for a rollout that starts the counter at
// initial and adds each of adds in turn: the prompt is "add 1 then add 2
// then get the count" (for adds 1 and 2; "get the count" alone without
// adds), the row lists Tools, and its task fields are initial_count and
// expected_count (initial plus the sum of adds).
func Row(initial int, adds ...int) protocol.RunRequest {
	steps := make([]string, 0, len(adds)+1)
	expected := initial
	for _, n := range adds {
		steps = append(steps, fmt.Sprintf("add %d", n))
		expected += n
	}
	steps = append(steps, "get the count")
	row := protocol.RunRequest{ResponsesCreateParams: protocol.ResponseCreateParams{
		Input: protocol.ItemsInput(protocol.UserMessage(strings.Join(steps, " then "))),
		Tools: Tools(),
	}}
	_ = row.Fields.Set(FieldInitialCount, initial)
	_ = row.Fields.Set(FieldExpectedCount, expected)
	return row
}
