package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
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

// episodeResult is an episode's response and the cookies it ended with.
type episodeResult struct {
	response                       protocol.Response
	resourcesCookies, modelCookies []*http.Cookie
}

// episode runs upstream's model/tool loop on params: it calls the model at
// modelURL with the input grown by every item so far, executes each
// function call on the resources server, and stops on an incomplete
// response, on a turn without a function call, or at max_steps. A turn
// with neither a function call nor an assistant message (reasoning only,
// or no output at all) ends the episode as incomplete (see terminate).
// It returns the last model response holding every item of every turn
// and the summed usage. resourcesCookies are sent with the first tool
// call; each tool answer's cookies are merged into them (a cookie of the
// same name replaced, a new one added), and each model answer's cookies
// replace the model's. id, when not "", labels the gym.agent.responses
// span and the termination warning; prefix, when not "", is the
// rollout-id path prefix of the tool calls. Each model call and tool call
// is a step of steps (the rollout's live episode), turn by turn.
//
// Each turn (a model call and the tool calls it asks for) is recorded
// into gym.agent.turn_duration_ms, the number of turns into
// gym.agent.turn_count once per episode, failed episodes included.
func (a *agent) episode(ctx context.Context, params protocol.ResponseCreateParams, modelURL, id, prefix string,
	resourcesCookies []*http.Cookie, steps *live.EpisodeHandle) (res episodeResult, err error) {
	p := params.Clone()
	if a.cfg.Model != "" {
		m := a.cfg.Model
		p.Model = &m
	}
	var span trace.Span
	if ctx, span = lens.StartRecording(ctx, telemetry.GroupAgent, contract.SpanAgentResponses); span != nil {
		attrs := lens.NewAttrs() // set in one call as the span ends
		attrs.Add(attribute.String(contract.AttrServerName, serverName()))
		if id != "" {
			attrs.Add(attribute.String(contract.AttrRolloutID, id))
		}
		if p.Model != nil {
			attrs.Add(attribute.String(contract.AttrGenAIRequestModel, *p.Model))
		}
		defer func() {
			if u := res.response.Usage; err == nil && u != nil {
				attrs.Add(attribute.Int(contract.AttrGenAIInputTokens, u.InputTokens),
					attribute.Int(contract.AttrGenAIOutputTokens, u.OutputTokens))
			}
			attrs.SetOn(span)
			lens.End(span, err)
		}()
	}
	// Metrics are decided once per episode; off, no clock is read for
	// them and no agent name is looked up. (The live episode's steps read
	// the clock as they start and end whatever.)
	var agentName string
	metricsOn := telemetry.Instruments() != nil
	turns := 0
	if metricsOn {
		agentName = serverName()
		defer func() { metrics.RecordAgentTurns(agentName, turns) }()
	}

	input := p.Input.AsItems()
	var (
		items        []protocol.Item
		usage        *protocol.Usage
		modelCookies []*http.Cookie
		last         protocol.Response
	)
	for step := 1; ; step++ {
		var turnStart time.Time
		if metricsOn {
			turnStart = time.Now()
		}
		turns++
		body := p
		turnInput := make([]protocol.Item, 0, len(input)+len(items))
		body.Input = protocol.ItemsInput(append(append(turnInput, input...), items...)...)

		raw, err := body.MarshalJSON()
		if err != nil {
			return res, fmt.Errorf("model call: encode the request: %w", err)
		}
		r, cookies, err := a.callModel(ctx, modelURL, raw, p.Model, modelCookies, metricsOn, steps, step)
		if err != nil {
			return res, err
		}
		modelCookies = cookies
		items = append(items, r.Output...)
		usage = usage.Add(r.Usage)
		last = r

		if r.IncompleteDetails != nil {
			a.endTurn(metricsOn, agentName, turnStart)
			break
		}
		calls := r.FunctionCalls()
		if len(calls) == 0 {
			if !r.HasAssistantMessage() {
				last = a.terminate(last, id, step)
			}
			a.endTurn(metricsOn, agentName, turnStart)
			break
		}
		for _, call := range calls {
			output, cookies, called, err := a.callTool(ctx, prefix, call, resourcesCookies, metricsOn, steps, step)
			if err != nil {
				return res, err
			}
			if called {
				resourcesCookies = mergeCookies(resourcesCookies, cookies)
			}
			items = append(items, protocol.FunctionCallOutput(call.CallID, output))
		}
		a.endTurn(metricsOn, agentName, turnStart)
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

// endTurn records one completed turn.
func (a *agent) endTurn(metricsOn bool, agentName string, start time.Time) {
	if metricsOn {
		metrics.RecordAgentTurn(agentName, time.Since(start))
	}
}

// Termination of an episode by a turn with neither a function call nor
// an assistant message, as upstream's simple agent marks it: the
// episode's response gets status "incomplete" and these two members in
// its metadata.
const (
	// KeyTerminationReason is the metadata member naming why the episode
	// ended: TerminationIncompleteReasoning or TerminationEmptyOutput.
	KeyTerminationReason = "ng_termination_reason"
	// KeyTerminationMessage is the metadata member holding
	// TerminationMessage.
	KeyTerminationMessage = "ng_termination_message"
	// TerminationIncompleteReasoning is the reason for a turn whose output
	// has items, none a function call or an assistant message (reasoning
	// only, say).
	TerminationIncompleteReasoning = "incomplete_reasoning"
	// TerminationEmptyOutput is the reason for a turn with no output item.
	TerminationEmptyOutput = "empty_output"
	// TerminationMessage is the text of ng_termination_message, word for
	// word upstream's (nemo-gym 0.7.0).
	TerminationMessage = "Ending trajectory: model returned no assistant message or tool calls " +
		"(reasoning-only or empty output) without reported truncation. " +
		"This is the stop-token case (finish_reason='stop'), not length truncation " +
		"(finish_reason='length', handled separately via incomplete_details). " +
		"This indicates either a badly trained model requiring training-level fixes " +
		"or a bug in the inference engine."
)

// terminate marks r, the response of an episode's last turn (its own
// output still in place), as ended by a turn with neither a function call
// nor an assistant message: status incomplete, and the termination
// reason and message added to its metadata (members it had are kept). It
// logs a warning naming the model server, the response, the rollout id
// (id, "" for none) and the turn.
func (a *agent) terminate(r protocol.Response, id string, step int) protocol.Response {
	reason := TerminationIncompleteReasoning
	if len(r.Output) == 0 {
		reason = TerminationEmptyOutput
	}
	md := make(map[string]string, len(r.Metadata)+2)
	maps.Copy(md, r.Metadata)
	md[KeyTerminationReason], md[KeyTerminationMessage] = reason, TerminationMessage
	r.Status, r.Metadata = protocol.ResponseIncomplete, md
	slog.Default().Warn("agent: "+TerminationMessage, "reason", reason, "model_server", a.cfg.ModelServerName,
		"response_id", r.ID, "rollout_id", id, "step", step)
	return r
}

// callModel makes one model call (POST /v1/responses with body) and
// returns the validated answer and the cookies it set. Its CLIENT span
// gets the GenAI semantic conventions' attributes when it records; with
// metricsOn the call is recorded into gym.model.call_duration_ms,
// gym.model.time_to_first_byte_ms and the gen_ai.client.* histograms.
// The call is a model_call step of ep in turn turn, failed when the answer
// is invalid too.
func (a *agent) callModel(ctx context.Context, modelURL string, body []byte, model *string,
	cookies []*http.Cookie, metricsOn bool, ep *live.EpisodeHandle, turn int) (r protocol.Response, _ []*http.Cookie, err error) {
	start := time.Now()
	ep.Enter(live.StageModel, turn, start)
	reply, err := a.client.PostSpan(ctx, modelURL, server.RawJSON(body), &r, server.Call{Cookies: cookies, TimeFirstByte: metricsOn})
	if err == nil {
		if verr := r.Validate(); verr != nil {
			err = fmt.Errorf("invalid response from the model server: %w", verr)
		}
	}
	end := time.Now()
	ep.Leave(reply.Status, err != nil, end)
	requestModel := ""
	if model != nil {
		requestModel = *model
	}
	if reply.Span.IsRecording() {
		reply.AddSpanAttributes(
			attribute.String(contract.AttrGenAIOperationName, contract.GenAIOperationChat),
			attribute.String(contract.AttrGenAIProviderName, contract.GenAIProviderOpenAI))
		if requestModel != "" {
			reply.AddSpanAttributes(attribute.String(contract.AttrGenAIRequestModel, requestModel))
		}
		if err == nil {
			addResponseAttrs(&reply, &r)
		}
	}
	reply.EndSpan()
	if metricsOn {
		d := end.Sub(start)
		metrics.RecordModelCall(contract.DialectResponses, a.cfg.ModelServerName, d, reply.FirstByte)
		call := metrics.GenAICall{Operation: contract.GenAIOperationChat, Provider: contract.GenAIProviderOpenAI,
			RequestModel: requestModel, ServerAddress: a.modelHost, ServerPort: a.modelPort, Duration: d,
			InputTokens: -1, OutputTokens: -1}
		if err != nil {
			call.ErrorType = errorType(err)
		} else {
			call.ResponseModel = r.Model
			if r.Usage != nil {
				call.InputTokens, call.OutputTokens = int64(r.Usage.InputTokens), int64(r.Usage.OutputTokens)
			}
		}
		metrics.RecordGenAI(call)
	}
	if err != nil {
		return r, nil, fmt.Errorf("model call: %w", err)
	}
	return r, reply.Cookies, nil
}

// addResponseAttrs adds the GenAI attributes of a Responses API answer to
// the model call's open CLIENT span: response model and id, token usage,
// finish reasons.
func addResponseAttrs(reply *server.Reply, r *protocol.Response) {
	reply.AddSpanAttributes(
		attribute.String(contract.AttrGenAIResponseModel, telemetry.ModelName(r.Model)),
		attribute.String(contract.AttrGenAIResponseID, r.ID),
		attribute.StringSlice(contract.AttrGenAIFinishReasons, []string{finishReason(r)}))
	if u := r.Usage; u != nil {
		reply.AddSpanAttributes(attribute.Int(contract.AttrGenAIInputTokens, u.InputTokens),
			attribute.Int(contract.AttrGenAIOutputTokens, u.OutputTokens))
	}
}

// finishReason maps a Responses API answer to the finish reason the GenAI
// conventions name (contract.ResponseFinishReason).
func finishReason(r *protocol.Response) string {
	reason := ""
	if r.IncompleteDetails != nil {
		reason = r.IncompleteDetails.Reason
	}
	return contract.ResponseFinishReason(r.Status, reason, len(r.FunctionCalls()) > 0)
}

// errorType is a failed model call's error.type: the peer's status, or
// "timeout", else "_OTHER".
func errorType(err error) string {
	if s := server.StatusOf(err); s != 0 {
		return strconv.Itoa(s)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return contract.RetryTimeout
	}
	return contract.Other
}

// callTool executes one function call: POST to the tool's route (under
// prefix, a rollout-id path prefix or "") with the parsed arguments, whose
// answer of any status is the output. Arguments that Python's json.loads
// refuses make upstream's error output and no call (called false). With
// metricsOn the call is recorded into gym.tool.call_duration_ms. A call
// made is a tool_call step of ep in turn turn (an answer of 400 or more
// counts failed there, though the episode goes on with it).
func (a *agent) callTool(ctx context.Context, prefix string, call protocol.Item, cookies []*http.Cookie,
	metricsOn bool, ep *live.EpisodeHandle, turn int) (output string, _ []*http.Cookie, called bool, _ error) {
	args, refused := toolArguments(call.Arguments)
	if refused != "" {
		return invalidArguments(refused), nil, false, nil
	}
	start := time.Now()
	ep.Enter(live.StageTool, turn, start)
	reply, err := a.client.Post(ctx, a.toolURL(prefix, call.Name), args, nil, server.Call{Cookies: cookies, AnyStatus: true})
	end := time.Now()
	ep.Leave(reply.Status, err != nil, end)
	if metricsOn {
		metrics.RecordToolCall(call.Name, a.cfg.ResourcesServerName, end.Sub(start))
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("tool %q: %w", call.Name, err)
	}
	return string(reply.Body), reply.Cookies, true, nil
}

// toolArguments returns the body of a tool call with the arguments
// text, or, for arguments upstream's json.loads refuses, the repr of its
// error (pythonJSONError). Arguments encoding/json accepts Python accepts
// too, and go out as JSON; the few only Python accepts (NaN, Infinity and
// -Infinity) go out as they came, as upstream sends them on.
func toolArguments(text string) (body any, refused string) {
	if json.Valid([]byte(text)) {
		return json.RawMessage(text), ""
	}
	if refused = pythonJSONError(text); refused != "" {
		return nil, refused
	}
	return server.RawJSON(text), ""
}

// invalidArguments is the tool output of a call whose arguments do not
// parse: {"error": "Invalid tool call arguments: <why>"}, spaced as
// Python's json.dumps writes it (why is printable ASCII).
func invalidArguments(why string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode("Invalid tool call arguments: " + why)
	return `{"error": ` + string(bytes.TrimSpace(b.Bytes())) + `}`
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
		if !a.cfg.executesTools() {
			return protocol.Response{}, failed(errResponsesWithoutTools)
		}
		id, path := a.modelPath(ctx, mode)
		prefix := ""
		if id != "" {
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.SetAttributes(attribute.String(contract.AttrRolloutID, id))
			}
			ctx = telemetry.WithRolloutID(ctx, id)
			if protocol.ValidRolloutID(id) {
				prefix = a.rolloutPrefix(ctx, id)
			}
		}
		steps := a.episodes.Begin(liveID(id), time.Now())
		defer steps.End()
		ep, err := a.episode(ctx, body.ResponseCreateParams, endpoint(a.model, path), id, prefix, a.inboundCookies(ctx), steps)
		if err != nil {
			return protocol.Response{}, failed(err)
		}
		setCookies(ctx, ep.resourcesCookies)
		setCookies(ctx, ep.modelCookies)
		return ep.response, nil
	}
}
