package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// errAborted records a rollout whose handler was aborted.
var errAborted = errors.New("rollout aborted")

// errRolloutPanicked fails a rollout whose code panicked.
var errRolloutPanicked = errors.New("rollout panicked")

// errRunWithoutTools and errResponsesWithoutTools fail /run and
// /v1/responses with execute_tools false as upstream's do, their text the
// repr of the ValueError upstream raises (its 500 body): it supports
// execute_tools false only for agent sessions, which this agent does not
// serve.
var (
	errRunWithoutTools = errors.New("ValueError(" + pyRepr("Simple Agent execute_tools=false is supported only "+
		"for agent-session requests; the legacy /run route requires execute_tools=true") + ")")
	errResponsesWithoutTools = errors.New("ValueError(" + pyRepr("Simple Agent execute_tools=false is supported "+
		"only for agent-session requests; seed an agent session before calling /v1/responses") + ")")
)

// run performs one rollout of a row (POST /run): seed the session, run
// the episode, verify it. Every failure is the request's failure (500),
// as upstream raises; each rollout the runtime let through validation is
// recorded once with metrics.RecordRollout, failed ones included, and a
// panic is recorded and answered as an error instead of unwinding into
// the runtime. The answer is the resources server's verify answer as it
// came, with upstream's two edits (see rollout).
func (a *agent) run(ctx context.Context, row protocol.RunRequest) (out server.RawJSON, err error) {
	start := time.Now()
	// The request's SERVER span (a non-recording one without the server
	// group), which gets the rollout id once the row is read.
	serverSpan := trace.SpanFromContext(ctx)
	ctx, span := lens.StartRecording(ctx, telemetry.GroupRollout, contract.SpanRollout)
	var attrs *lens.Attrs // the rollout span's, set in one call as it ends
	if span != nil {
		attrs = lens.NewAttrs()
		attrs.Add(attribute.String(contract.AttrServerName, serverName()))
	}
	setTraceResponse(ctx)
	defer func() {
		r := recover()
		switch {
		case r == http.ErrAbortHandler:
			err = errAborted
		case r != nil:
			// The value stays in the log: it could quote the task or the
			// answer, which never go on spans or to the caller.
			slog.Default().Error("agent: rollout panicked", "panic", r, "stack", string(debug.Stack()))
			err = errRolloutPanicked
		}
		err = failed(err)
		metrics.RecordRollout(time.Since(start), err == nil)
		if span != nil {
			attrs.SetOn(span)
			lens.End(span, err)
		}
		if r == http.ErrAbortHandler {
			panic(r) // the runtime's way to drop the connection
		}
	}()

	// Upstream reads a row's rollout id only when the fleet has
	// observability_enabled, and then raises on an explicit id it would
	// refuse (a 500); otherwise such an id is no id. An absent id is no
	// id either: none is minted. (An explicit id that is not a string is
	// refused by the row's validation, a 422, as upstream's model does.)
	id, ok, err := row.ResolveRolloutID()
	if err != nil {
		if a.cfg.ObservabilityEnabled {
			return out, err
		}
		id, ok = "", false
	}
	if ok {
		if span != nil {
			attrs.Add(attribute.String(contract.AttrRolloutID, id))
			attrs.Add(telemetry.RolloutIdentity(row.TaskIndex, row.RolloutIndex, row.AttemptIndex)...)
		}
		if serverSpan.IsRecording() {
			serverSpan.SetAttributes(attribute.String(contract.AttrRolloutID, id))
		}
		ctx = telemetry.WithRolloutID(ctx, id)
	}
	// The live view's episode, always on: a rollout without an id counts
	// in the stages only.
	ep := a.episodes.Begin(id, start)
	defer ep.End()
	return a.rollout(ctx, row, id, ep)
}

// rollout is upstream's run, with the episode run in this process rather
// than through an HTTP call to the agent's own /v1/responses. Its answer
// is the verify answer's bytes, passed on without a decode and an encode:
// upstream's agent returns the resources server's answer as it parsed
// it, every member kept, and protocol.CheckVerifyResponse refuses what
// the typed decode and Validate refused for the reward and the kinds of
// the echoed members, in one shallow pass. The two edits upstreamAnswer
// makes (its verify-response model's defaults added, an echoed
// _ng_rollout_id left out) are one more shallow pass.
//
// Its seed_session, the episode's calls and its verify are the steps of
// ep, the rollout's live episode.
func (a *agent) rollout(ctx context.Context, row protocol.RunRequest, id string, ep *live.EpisodeHandle) (server.RawJSON, error) {
	if !a.cfg.executesTools() {
		return nil, errRunWithoutTools
	}
	// Requests go out as their own encoding (server.RawJSON): the
	// protocol types write valid compact JSON, and encoding/json would
	// scan each whole body again to check and compact it. The seed and
	// verify get the row without its _ng_rollout_id, as upstream's dump
	// leaves it out; the episode runs on the parameters either way.
	row, rowBody, err := forwardedRow(row)
	if err != nil {
		return nil, fmt.Errorf("seed_session: %w", err)
	}
	// With a rollout id, every call goes under its path prefix, as
	// upstream's clients send a rollout's calls (see prefixes).
	seedURL, verifyURL, modelURL := a.seedURL, a.verifyURL, a.modelURL
	prefix := a.rolloutPrefix(ctx, id)
	if prefix != "" {
		seedURL = rolloutEndpoint(a.resources, a.resourcesRoot, prefix, protocol.PathSeedSession)
		verifyURL = rolloutEndpoint(a.resources, a.resourcesRoot, prefix, protocol.PathVerify)
		modelURL = rolloutEndpoint(a.model, a.modelRoot, prefix, protocol.PathResponses)
	}
	ep.Enter(live.StageSeed, 0, time.Now())
	seed, err := a.client.Post(ctx, seedURL, server.RawJSON(rowBody), nil, server.Call{Cookies: a.inboundCookies(ctx)})
	ep.Leave(seed.Status, err != nil, time.Now())
	if err != nil {
		return nil, fmt.Errorf("seed_session: %w", err)
	}

	res, err := a.episode(ctx, row.ResponsesCreateParams, modelURL, id, prefix, seed.Cookies, ep)
	if err != nil {
		return nil, err
	}

	// The row, with the episode as its response (one a row carried is
	// replaced, as upstream's dict merge replaces it).
	req := protocol.VerifyRequest{RunRequest: row, Response: res.response}
	req.Fields = row.Fields.Clone()
	req.Fields.Delete(protocol.KeyResponse)

	if a.cfg.SkipVerification {
		out := protocol.NewVerifyResponse(req, a.cfg.SkipVerificationReward)
		if err := out.Fields.Set(KeyVerificationSkipped, true); err != nil {
			return nil, err
		}
		b, err := encodeAnswer(out)
		if err != nil {
			return nil, err
		}
		return upstreamAnswer(b), nil
	}

	// Upstream's self-call answer sets the resources and model cookies the
	// episode ended with, then the agent's own session cookie; verify is
	// called with all of them.
	cookies := mergeCookies(res.resourcesCookies, res.modelCookies, ownCookies(ctx))
	reqBody, err := req.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("verify: encode the request: %w", err)
	}
	var out verifyAnswer
	ep.Enter(live.StageVerify, 0, time.Now())
	reply, err := a.client.Post(ctx, verifyURL, server.RawJSON(reqBody), &out, server.Call{Cookies: cookies})
	if err != nil {
		ep.Leave(reply.Status, true, time.Now())
		return nil, fmt.Errorf("verify: %w", err)
	}
	err = protocol.CheckVerifyResponse(out)
	ep.Leave(reply.Status, err != nil, time.Now())
	if err != nil {
		return nil, fmt.Errorf("verify: invalid response from the resources server: %w", err)
	}
	return upstreamAnswer(out), nil
}

// verifyAnswer is a verify answer's bytes: the client's decoder has
// checked that they are one valid JSON value and hands them over whole.
// A newline ends them, as it ends every answer the runtime encodes.
type verifyAnswer []byte

// UnmarshalJSON keeps a copy of b (the decoder's buffer is reused).
func (v *verifyAnswer) UnmarshalJSON(b []byte) error {
	*v = append(append(make([]byte, 0, len(b)+1), b...), '\n')
	return nil
}

// encodeAnswer encodes a result the agent built itself, ending it with a
// newline as the runtime ends what it encodes. The protocol's encoder
// writes compact, valid JSON, so it needs no second pass.
func encodeAnswer(out protocol.VerifyResponse) (server.RawJSON, error) {
	b, err := out.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// failure is a failed call of the agent's: always a 500, as upstream's
// exception middleware answers whatever its handlers raise.
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

// failed turns err into a failure, hiding its chain from the runtime:
// the *protocol.ValidationError of a peer's invalid answer, for one,
// would otherwise be answered with 422, as if the caller's body were
// invalid.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &failure{msg: err.Error()}
}

// serverName is this process's server name (the telemetry resource's
// nemo.gym.server.name), or ServerName when telemetry has none.
func serverName() string {
	if res := telemetry.Get().Resource(); res != nil {
		if v, ok := res.Set().Value(contract.AttrServerName); ok && v.AsString() != "" {
			return v.AsString()
		}
	}
	return ServerName
}

// setTraceResponse sets the traceresponse header of the response being
// answered from ctx's span (gym.rollout, else the SERVER span), so that a
// caller without telemetry of its own can still learn the rollout's trace
// id; none when the span is the caller's (see server.SetTraceResponse).
func setTraceResponse(ctx context.Context) {
	server.SetTraceResponse(server.ResponseHeader(ctx), trace.SpanContextFromContext(ctx))
}
