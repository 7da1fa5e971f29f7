package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// episodeResult is an episode's response and the cookies it ended with.
type episodeResult struct {
	response                       protocol.Response
	resourcesCookies, modelCookies []*http.Cookie
}

// episode runs upstream's model/tool loop on params: it calls the model at
// modelURL with the input grown by every item so far, executes each
// function call on the resources server, and stops on an incomplete
// response, on a turn that answers (an assistant message and no function
// call), or at max_steps. It returns the last model response holding
// every item of every turn and the summed usage. resourcesCookies are
// sent with the first tool call; each tool answer's cookies replace them,
// and each model answer's cookies replace the model's. id, when not "",
// labels the gym.agent.responses span.
func (a *agent) episode(ctx context.Context, params protocol.ResponseCreateParams, modelURL, id string,
	resourcesCookies []*http.Cookie) (res episodeResult, err error) {
	p := params.Clone()
	if a.cfg.Model != "" {
		m := a.cfg.Model
		p.Model = &m
	}
	if lens.Enabled(telemetry.GroupAgent) {
		var span trace.Span
		ctx, span = lens.Start(ctx, telemetry.GroupAgent, ResponsesSpanName)
		span.SetAttributes(attribute.String(telemetry.AttrServerName, serverName()))
		if id != "" {
			span.SetAttributes(attribute.String(telemetry.AttrRolloutID, id))
		}
		if p.Model != nil {
			span.SetAttributes(attribute.String(AttrRequestModel, *p.Model))
		}
		defer func() {
			if u := res.response.Usage; err == nil && u != nil {
				span.SetAttributes(attribute.Int(AttrInputTokens, u.InputTokens), attribute.Int(AttrOutputTokens, u.OutputTokens))
			}
			lens.End(span, err)
		}()
	}

	input := p.Input.AsItems()
	var (
		items        []protocol.Item
		usage        *protocol.Usage
		modelCookies []*http.Cookie
		last         protocol.Response
	)
	for step := 1; ; step++ {
		body := p
		turnInput := make([]protocol.Item, 0, len(input)+len(items))
		body.Input = protocol.ItemsInput(append(append(turnInput, input...), items...)...)

		raw, err := body.MarshalJSON()
		if err != nil {
			return res, fmt.Errorf("model call: encode the request: %w", err)
		}
		var r protocol.Response
		reply, err := a.client.Post(ctx, modelURL, server.RawJSON(raw), &r, server.Call{Cookies: modelCookies})
		if err != nil {
			return res, fmt.Errorf("model call: %w", err)
		}
		modelCookies = reply.Cookies
		if err := r.Validate(); err != nil {
			return res, fmt.Errorf("model call: invalid response from the model server: %w", err)
		}
		items = append(items, r.Output...)
		usage = usage.Add(r.Usage)
		last = r

		if r.IncompleteDetails != nil {
			break
		}
		calls := r.FunctionCalls()
		if len(calls) == 0 && r.HasAssistantMessage() {
			break
		}
		for _, call := range calls {
			output, cookies, called, err := a.callTool(ctx, call, resourcesCookies)
			if err != nil {
				return res, err
			}
			if called {
				resourcesCookies = cookies
			}
			items = append(items, protocol.FunctionCallOutput(call.CallID, output))
		}
		if a.cfg.bounded(step) {
			break
		}
	}
	if items == nil {
		items = []protocol.Item{}
	}
	last.Output, last.Usage = items, usage
	return episodeResult{response: last, resourcesCookies: resourcesCookies, modelCookies: modelCookies}, nil
}

// callTool executes one function call: POST to the tool's route with the
// parsed arguments, whose answer of any status is the output. Arguments
// that are not JSON make an error output and no call (called false).
func (a *agent) callTool(ctx context.Context, call protocol.Item, cookies []*http.Cookie) (output string, _ []*http.Cookie, called bool, _ error) {
	var args json.RawMessage
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return invalidArguments(err), nil, false, nil
	}
	reply, err := a.client.Post(ctx, a.toolURL(call.Name), args, nil, server.Call{Cookies: cookies, AnyStatus: true})
	if err != nil {
		return "", nil, false, fmt.Errorf("tool %q: %w", call.Name, err)
	}
	return string(reply.Body), reply.Cookies, true, nil
}

// invalidArguments is the tool output of a call whose arguments do not
// parse: {"error": "Invalid tool call arguments: <why>"}, spaced as
// Python's json.dumps writes it.
func invalidArguments(err error) string {
	var why bytes.Buffer
	enc := json.NewEncoder(&why)
	enc.SetEscapeHTML(false)
	_ = enc.Encode("Invalid tool call arguments: " + err.Error())
	return `{"error": ` + string(bytes.TrimSpace(why.Bytes())) + `}`
}

// responsesBody is the body of POST /v1/responses: the parameters, with
// upstream's validation.
type responsesBody struct {
	protocol.ResponseCreateParams
}

// Validate checks the parameters as upstream's NeMoGymResponseCreateParams
// does (unknown members are refused), with locations relative to the body.
func (b *responsesBody) Validate() error { return b.ResponseCreateParams.Validate() }

// responsesHandler serves one form of POST /v1/responses for outside
// callers (upstream's agent calls its own): the episode, with the
// request's cookies for the resources server and the request's rollout
// prefix kept on the model calls. The answer sets the resources and model
// cookies the episode ended with.
func (a *agent) responsesHandler(mode prefixMode) func(context.Context, responsesBody) (protocol.Response, error) {
	return func(ctx context.Context, body responsesBody) (protocol.Response, error) {
		id, path := a.modelPath(ctx, mode)
		if id != "" {
			ctx = telemetry.WithRolloutID(ctx, id)
		}
		ep, err := a.episode(ctx, body.ResponseCreateParams, endpoint(a.model, path), id, a.inboundCookies(ctx))
		if err != nil {
			return protocol.Response{}, failed(err)
		}
		setCookies(ctx, ep.resourcesCookies)
		setCookies(ctx, ep.modelCookies)
		return ep.response, nil
	}
}
