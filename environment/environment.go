package environment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// An Environment is a NeMo Gym resources server: the routes every such
// server has (seed_session, verify, aggregate_metrics, reverify_mode),
// the environment's tools, and its per-session state. New makes one;
// Register puts its routes on a server, and ListenAndServe or Main run it
// as a process of its own.
//
// An Environment is immutable once made and safe for concurrent use; one
// value may back several servers (they then share its Sessions stores).
type Environment struct {
	name     string
	verifier Verifier
	seed     func(ctx context.Context, req *SeedSessionRequest) error
	tools    []*tool
	reverify string
	metrics  func(tasks [][]Fields) map[string]any // ComputeMetrics's hook
}

// An Option adds to an environment what New is not given directly: Seed,
// Tool, ReverifyMode, ComputeMetrics.
type Option func(*Environment)

// New returns the environment name with verifier v (see Verify) and the
// given options. name is the implementation's name; it names the session
// cookie and, when telemetry has no server name, the gym.verify spans.
//
// Like http.ServeMux with a bad pattern, New panics on a definition that
// cannot work: an empty name, a Verifier not made by Verify, a bad or
// repeated tool name, an unknown reverify mode.
func New(name string, v Verifier, opts ...Option) *Environment {
	if name == "" {
		panic("environment: New with an empty name")
	}
	if v.prepare == nil {
		panic("environment: New with a Verifier not made by Verify")
	}
	e := &Environment{name: name, verifier: v, reverify: ReverifyUnknown}
	for _, o := range opts {
		o(e)
	}
	return e
}

// SeedSessionRequest is the body of POST /seed_session that a seed
// function gets: the whole dataset row, its task fields in Fields. It is
// protocol.SeedSessionRequest, named here so that a seed function's
// signature needs no other package of this module.
type SeedSessionRequest = protocol.SeedSessionRequest

// Seed sets the environment's seed function: POST /seed_session, called
// once per rollout before the model's first turn with the whole dataset
// row, decodes the row's fields into T (as Verify decodes a task; a
// mismatch is a 422) and stores the state fn returns as the state of the
// caller's session in store, replacing any earlier one. Tools and the
// verify function read it from the same store. An error from fn answers
// as one from a verify function does, and stores nothing.
//
// Without Seed, /seed_session accepts any JSON object and answers {},
// as upstream's base server does. Seed panics when store or fn is nil.
func Seed[S, T any](store *Sessions[S], fn func(ctx context.Context, req *SeedSessionRequest, seed T) (S, error)) Option {
	if store == nil || fn == nil {
		panic("environment: Seed with a nil store or function")
	}
	decoderOf(reflect.TypeFor[T]())
	return func(e *Environment) {
		e.seed = func(ctx context.Context, req *SeedSessionRequest) error {
			seed, err := decodeFields[T](req.Fields)
			if err != nil {
				return protocol.DecodeError(err, "body")
			}
			state, err := fn(ctx, req, seed)
			if err != nil {
				return err
			}
			return store.Set(ctx, state)
		}
	}
}

// The modes of ReverifyMode, the values GET /reverify_mode answers
// (protocol's, named here for ReverifyMode's callers).
const (
	// ReverifyStateless: verify depends on the request alone, so a
	// result can be scored again from its record.
	ReverifyStateless = protocol.ReverifyStateless
	// ReverifyUnsupported: a result cannot be scored again.
	ReverifyUnsupported = protocol.ReverifyUnsupported
	// ReverifyUnknown: the environment does not say (the default).
	ReverifyUnknown = protocol.ReverifyUnknown
)

// ReverifyMode sets what GET /reverify_mode answers: whether `gym eval
// reverify` may score this environment's results again,
// ReverifyStateless, ReverifyUnsupported or ReverifyUnknown (the
// default). It panics on any other mode.
func ReverifyMode(mode string) Option {
	switch mode {
	case ReverifyStateless, ReverifyUnsupported, ReverifyUnknown:
	default:
		panic(fmt.Sprintf("environment: unknown reverify mode %q", mode))
	}
	return func(e *Environment) { e.reverify = mode }
}

// ComputeMetrics sets the environment's compute_metrics hook, the one a
// benchmark overrides upstream (AggregateMetricsMixin.compute_metrics,
// nemo_gym/reward_profile.py:803, 0.7.0) for metrics that need every
// result at once (pass@k, confidence intervals, spread across runs). POST
// /aggregate_metrics calls fn once and adds what it returns to
// agent_metrics, after the baseline statistics (see AggregateMetrics)
// and replacing any of the same name; key_metrics then holds every
// mean/* entry of the merged set. fn gets the scored verify responses
// (masked ones are left out) grouped by task (_ng_task_index, ascending;
// a response without one counts as task 0), each group in the order the
// responses came; it is not called when every response is masked.
//
// A per_task_metrics member of fn's result is not an agent metric: as
// upstream, it is a list of objects, each naming its task by
// _ng_task_index, whose other members are set on that task's
// group_level_metrics object (replacing a member of the same name in
// place, else added after the others, in key order for a Go map); a later
// entry for a task replaces an earlier one. An entry without an integer
// _ng_task_index makes the call fail (500).
func ComputeMetrics(fn func(tasks [][]Fields) map[string]any) Option {
	return func(e *Environment) { e.metrics = fn }
}

// Name returns the environment's name.
func (e *Environment) Name() string { return e.name }

// Tools returns the definitions of the environment's tools, in the order
// they were added, for datasets to list in responses_create_params.tools.
func (e *Environment) Tools() []protocol.Tool {
	out := make([]protocol.Tool, len(e.tools))
	for i, t := range e.tools {
		d := t.def
		strict := *d.Strict
		desc := *d.Description
		d.Strict, d.Description = &strict, &desc
		d.Parameters = append(json.RawMessage(nil), d.Parameters...)
		out[i] = d
	}
	return out
}

// ServerOptions returns the server options the environment called name
// (its Name) needs, for server.New: the resources server type, the
// rollout-prefix stripping of resources servers (/ng-rollout/<id>/verify
// routes as /verify, with the id in server.RolloutID), and the session
// cookie named "<name>___<instance>", as upstream names its cookies
// after the server class and the instance. instance is the server's
// name in the fleet; "" means name. The caller adds the server's name,
// address and limits. It takes the name rather than the Environment so
// that a server's options are known before the environment is built.
func ServerOptions(name, instance string) server.Options {
	if instance == "" {
		instance = name
	}
	return server.Options{
		Type:          contract.ServerTypeResources,
		RolloutPrefix: server.PrefixResources,
		SessionCookie: contract.SessionCookieName(name, instance),
	}
}

// Register puts the environment's routes on s: POST /seed_session, POST
// /verify, POST /aggregate_metrics, GET /reverify_mode and POST /<tool>
// for each tool (GET / is the server's own). s should be built with
// ServerOptions(e.Name(), instance); without them sessions do not work
// (Set and Update return ErrNoSession) and prefixed paths are not found.
//
// Register cannot fail on a server that is not serving yet; like
// http.ServeMux.Handle it panics on a mistake in the calling code: a nil
// s, or an s that already serves. Routes s already has (the environment
// registered on it twice) panic when s builds its handler.
func (e *Environment) Register(s *server.Server) {
	if s == nil {
		panic("environment: Register on a nil server")
	}
	server.Handle(s, "POST "+protocol.PathSeedSession, e.seedSession)
	server.Handle(s, "POST "+protocol.PathVerify, e.verify)
	server.HandleStream(s, "POST "+protocol.PathAggregateMetrics, e.streamAggregateMetrics, e.aggregateMetrics, server.BulkBody())
	mode, _ := json.Marshal(e.reverify)
	s.HandleFunc("GET "+protocol.PathReverifyMode, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mode)
	})
	for _, t := range e.tools {
		t.register(s)
	}
}

// Handler returns an http.Handler serving the environment alone, on a
// server built with ServerOptions(e.Name(), "") and the default logger: for
// tests (httptest.NewServer(env.Handler())) and for embedding. Its
// telemetry is the process's at the time of the call.
func (e *Environment) Handler() http.Handler {
	opts := ServerOptions(e.name, "")
	opts.Name = e.name
	s := server.New(opts)
	e.Register(s)
	return s.Handler()
}

// seedSession answers POST /seed_session.
func (e *Environment) seedSession(ctx context.Context, req protocol.SeedSessionRequest) (protocol.SeedSessionResponse, error) {
	if e.seed != nil {
		if err := e.seed(ctx, &req); err != nil {
			return protocol.SeedSessionResponse{}, err
		}
	}
	return protocol.SeedSessionResponse{}, nil
}

// aggregateMetrics answers POST /aggregate_metrics (see AggregateMetrics)
// for a body read whole.
func (e *Environment) aggregateMetrics(_ context.Context, req protocol.AggregateMetricsRequest) (server.Streamed, error) {
	return aggregatorOf(req.VerifyResponses).answer(e.metrics), nil
}

// streamAggregateMetrics answers POST /aggregate_metrics as its body
// arrives (see aggstream): each verify response is split into its
// members and profiled once read, so that when the caller ends the body
// only the statistics are left to compute. A body of another shape is
// left to aggregateMetrics.
func (e *Environment) streamAggregateMetrics(_ context.Context, body io.Reader) (server.Streamed, error) {
	var a aggregator
	err := aggstream.Each(body, false, func(elem []byte) error {
		var f protocol.Fields // checks elem, and keeps parts of it
		if err := f.UnmarshalJSON(bytes.Clone(elem)); err != nil {
			// Valid JSON that protocol still refuses: the whole body's
			// decoding says where, as it always did.
			return fmt.Errorf("%w: %w", server.ErrNotStreamed, err)
		}
		if f == nil {
			f = protocol.Fields{}
		}
		a.add(f)
		return nil
	})
	if err != nil {
		return server.Streamed{}, err
	}
	return a.answer(e.metrics), nil
}
