package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// ServerName is the name this server has in a fleet configuration.
const ServerName = "simple_agent"

// Span names of the agent.
const (
	RolloutSpanName   = "gym.rollout"
	ResponsesSpanName = "gym.agent.responses"
)

// Span attribute keys the agent sets besides telemetry.AttrRolloutID.
const (
	AttrTaskID       = "nemo.gym.task.id"
	AttrRequestModel = "gen_ai.request.model"
	AttrInputTokens  = "gen_ai.usage.input_tokens"
	AttrOutputTokens = "gen_ai.usage.output_tokens"
)

// Paths the agent calls on its peers.
const (
	ResponsesPath = "/v1/responses"
	VerifyPath    = "/verify"
)

// Config configures the simple agent.
type Config struct {
	// ModelURL is the model server's base URL, such as
	// "http://127.0.0.1:8001".
	ModelURL string `json:"model_url" yaml:"model_url"`
	// ResourcesURL is the resources server's base URL.
	ResourcesURL string `json:"resources_url" yaml:"resources_url"`
	// Model is sent as the model name of every model call; "" leaves the
	// choice to the model server.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
}

// Defaults returns the default configuration, which is the zero value:
// the two URLs have no sensible default and must be set.
func Defaults() Config { return Config{} }

// Validate reports a configuration the agent cannot run with.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ key, val string }{{"model_url", c.ModelURL}, {"resources_url", c.ResourcesURL}} {
		if f.val == "" {
			errs = append(errs, fmt.Errorf("agent: %s is required", f.key))
			continue
		}
		u, err := url.Parse(f.val)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("agent: %s must be an absolute http or https URL", f.key))
		}
	}
	return errors.Join(errs...)
}

// Register validates cfg and registers POST /run on s. client makes the
// calls to the model and resources servers; it must not be nil.
func Register(s *server.Server, cfg Config, client *server.Client) error {
	if s == nil || client == nil {
		return errors.New("agent: Register needs a server and a client")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	a := &agent{
		cfg:       cfg,
		client:    client,
		modelURL:  endpoint(cfg.ModelURL, ResponsesPath),
		verifyURL: endpoint(cfg.ResourcesURL, VerifyPath),
	}
	server.Handle(s, protocol.RouteRun, a.run)
	return nil
}

// endpoint appends path to the path of base, keeping base's query string
// (base was validated already).
func endpoint(base, path string) string {
	u, _ := url.Parse(base)
	return u.JoinPath(path).String()
}

type agent struct {
	cfg                 Config
	client              *server.Client
	modelURL, verifyURL string
}

// run performs one rollout. Only a panic makes it fail as a request (the
// runtime answers 500); the rollout is recorded as failed first.
func (a *agent) run(ctx context.Context, req protocol.RunRequest) (resp protocol.RunResponse, _ error) {
	start := time.Now()
	id := req.RolloutID
	if id == "" {
		id = newRolloutID()
	}
	var span trace.Span
	if lens.Enabled(telemetry.GroupRollout) {
		// Attributes after the start rather than as an option: the tracer
		// copies them once instead of twice.
		ctx, span = lens.Start(ctx, telemetry.GroupRollout, RolloutSpanName)
		span.SetAttributes(attribute.String(telemetry.AttrRolloutID, id), attribute.String(AttrTaskID, req.Task.ID))
	}
	// The model and resources servers label their spans with it (when the
	// groups that read it are on; WithRolloutID decides).
	ctx = telemetry.WithRolloutID(ctx, id)
	recorded := false
	defer func() {
		if recorded {
			return
		}
		// Only reached when the code below panicked (or the goroutine is
		// exiting): record the failure, close the span, and let the
		// runtime turn the panic into a 500.
		r := recover()
		metrics.RecordRollout(time.Since(start), false)
		if span != nil {
			span.SetStatus(codes.Error, "rollout panicked")
			span.End()
		}
		if r != nil {
			panic(r)
		}
	}()

	resp = protocol.RunResponse{RolloutID: id, TaskID: req.Task.ID}
	err := a.rollout(ctx, id, req.Task, &resp)
	d := time.Since(start)
	resp.DurationMS = float64(d) / float64(time.Millisecond)
	if err != nil {
		resp.Error, resp.Reward, resp.Correct = err.Error(), 0, false
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		resp.TraceID = sc.TraceID().String()
	}
	metrics.RecordRollout(d, err == nil)
	recorded = true
	if span != nil {
		lens.End(span, err)
	}
	return resp, nil
}

// rollout asks the model and then the verifier, filling resp.
func (a *agent) rollout(ctx context.Context, id string, task protocol.Task, resp *protocol.RunResponse) error {
	answer, err := a.respond(ctx, id, task)
	if err != nil {
		return fmt.Errorf("model call failed: %w", err)
	}
	resp.Answer = answer
	var v protocol.VerifyResponse
	if err := a.client.PostJSON(ctx, a.verifyURL, protocol.VerifyRequest{Task: task, Answer: answer}, &v); err != nil {
		return fmt.Errorf("verify call failed: %w", err)
	}
	resp.Reward, resp.Correct = v.Reward, v.Correct
	return nil
}

// respond makes the model call, inside the gym.agent.responses span when
// that group is on.
func (a *agent) respond(ctx context.Context, id string, task protocol.Task) (answer string, err error) {
	var r protocol.ResponsesResponse
	if lens.Enabled(telemetry.GroupAgent) {
		var span trace.Span
		ctx, span = lens.Start(ctx, telemetry.GroupAgent, ResponsesSpanName, trace.WithAttributes(
			attribute.String(telemetry.AttrRolloutID, id),
			attribute.String(AttrTaskID, task.ID),
		))
		defer func() {
			if err == nil {
				span.SetAttributes(attribute.Int(AttrInputTokens, r.Usage.InputTokens), attribute.Int(AttrOutputTokens, r.Usage.OutputTokens))
			}
			lens.End(span, err)
		}()
		if a.cfg.Model != "" {
			span.SetAttributes(attribute.String(AttrRequestModel, a.cfg.Model))
		}
	}
	req := protocol.ResponsesRequest{
		Model: a.cfg.Model,
		Input: []protocol.InputMessage{{Role: "user", Content: task.Question}},
	}
	if err := a.client.PostJSON(ctx, a.modelURL, req, &r); err != nil {
		return "", err
	}
	return r.OutputText(), nil
}

// newRolloutID returns 16 random hex digits from crypto/rand, which is safe
// for concurrent use and shares no state with this package.
func newRolloutID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
