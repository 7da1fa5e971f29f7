package model

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// ServerName is the name this server has in a fleet configuration, and
// its default instance name.
const ServerName = "policy_model"

// streamRefusal is the message of the 422 a streaming request gets.
const streamRefusal = "Input should be False: this model server does not stream; send stream false or leave it out"

// ServerOptions returns the options a policy model server instance needs:
// the model-server form of the /ng-rollout/<id>/ prefix is stripped
// before routing, and every response sets the session cookie
// "policy_model___<instance>" ("" means ServerName). The caller adds
// name, address and limits.
func ServerOptions(instance string) server.Options {
	if instance == "" {
		instance = ServerName
	}
	return server.Options{RolloutPrefix: server.PrefixModel, SessionCookie: contract.SessionCookieName(ServerName, instance)}
}

// Register validates cfg and registers POST /v1/responses and POST
// /v1/chat/completions on s. In upstream mode the API key is resolved
// here, once: from the configured key, else from the variable
// cfg.Upstream.APIKeyEnv names.
func Register(s *server.Server, cfg Config) error {
	if s == nil {
		return errors.New("model: nil server")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	h := &handler{cfg: cfg, mode: contract.ModeBuiltin, provider: contract.GenAIProviderGymlens, ids: newIDSource()}
	if cfg.StallSeconds > 0 && len(cfg.StallTasks) > 0 {
		h.stallTasks = make(map[int]bool, len(cfg.StallTasks))
		for _, task := range cfg.StallTasks {
			h.stallTasks[task] = true
		}
		h.stallFor = time.Duration(cfg.StallSeconds * float64(time.Second))
	}
	if cfg.Upstream.BaseURL != "" {
		key := cfg.Upstream.APIKey
		if key == "" {
			key = os.Getenv(cfg.Upstream.APIKeyEnv)
		}
		up, err := newUpstream(cfg.Upstream, key)
		if err != nil {
			return err
		}
		h.up, h.mode, h.provider = up, contract.ModeUpstream, contract.GenAIProviderOpenAI
	}
	server.Handle(s, "POST "+protocol.PathResponses, h.responses)
	server.Handle(s, "POST "+protocol.PathChatCompletions, h.chatCompletions)
	return nil
}

// responsesRequest is the body of POST /v1/responses, checked against
// upstream's strict schema before the handler runs.
type responsesRequest struct {
	protocol.ResponseCreateParams
}

// Validate applies NeMoGymResponseCreateParamsNonStreaming's rules
// (unknown members, types, literals; the runtime puts the locations
// under "body"), with a refusal of stream true that says why.
func (r *responsesRequest) Validate() error {
	return validateParams(r.ResponseCreateParams)
}

// validateParams checks p as upstream's model server does, saying why
// stream true is refused.
func validateParams(p protocol.ResponseCreateParams) error {
	err := p.Validate()
	var ve *protocol.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &protocol.ValidationError{Detail: make([]protocol.FieldError, len(ve.Detail))}
	for i, d := range ve.Detail {
		if len(d.Loc) == 1 && d.Loc[0] == "stream" && d.Type == protocol.ErrLiteral {
			d.Msg = streamRefusal
		}
		out.Detail[i] = d
	}
	return out
}

type handler struct {
	cfg  Config
	mode string
	// provider is gen_ai.provider.name: openai when the answers come from
	// an OpenAI-compatible endpoint, gymlens for the built-in policy.
	provider string
	up       *upstream // nil in built-in mode
	ids      *idSource
	// stallTasks are the task indices whose first model call waits
	// stallFor (Config.StallTasks); nil when nothing stalls. Read-only.
	stallTasks map[int]bool
	stallFor   time.Duration
}

func (h *handler) requestModel() string {
	if h.up != nil {
		return h.up.model
	}
	return h.cfg.Model
}

// startSpan starts a model span when the model_call group is on; span and
// attrs are nil otherwise, and also when the span does not record (its
// trace was sampled out). attrs holds what the span will carry, set by
// endSpan in one call: the server's name, the rollout id when the
// request's path prefix or baggage names one, and the GenAI conventions'
// request attributes.
func (h *handler) startSpan(ctx context.Context, name string) (context.Context, trace.Span, *lens.Attrs) {
	ctx, span := lens.StartRecording(ctx, telemetry.GroupModelCall, name)
	if span == nil {
		return ctx, nil, nil
	}
	attrs := lens.NewAttrs()
	attrs.Add(
		attribute.String(contract.AttrServerName, h.cfg.Name),
		attribute.String(contract.AttrGenAIOperationName, contract.GenAIOperationChat),
		attribute.String(contract.AttrGenAIProviderName, h.provider),
		attribute.String(contract.AttrGenAIRequestModel, h.requestModel()),
		attribute.String(contract.AttrModelMode, h.mode),
	)
	if id := server.RequestRolloutID(ctx); id != "" {
		attrs.Add(attribute.String(contract.AttrRolloutID, id))
	}
	return ctx, span, attrs
}

// answer is what a model span records of a successful call.
type answer struct {
	id, model     string
	input, output int
	finish        []string
}

// endSpan ends a model span of startSpan, with its attributes and, when
// the call succeeded, the answer's id, model, token counts and finish
// reasons.
func endSpan(span trace.Span, attrs *lens.Attrs, err error, a answer) {
	if span == nil {
		return
	}
	if err == nil {
		attrs.Add(
			attribute.String(contract.AttrGenAIResponseModel, telemetry.ModelName(a.model)),
			attribute.String(contract.AttrGenAIResponseID, a.id),
			attribute.Int(contract.AttrGenAIInputTokens, a.input),
			attribute.Int(contract.AttrGenAIOutputTokens, a.output),
			attribute.StringSlice(contract.AttrGenAIFinishReasons, a.finish),
		)
	}
	attrs.SetOn(span)
	lens.End(span, err)
}

func (h *handler) responses(ctx context.Context, req responsesRequest) (resp protocol.Response, err error) {
	ctx, span, attrs := h.startSpan(ctx, contract.SpanModelResponses)
	if span != nil {
		defer func() {
			a := answer{id: resp.ID, model: resp.Model}
			if resp.Usage != nil {
				a.input, a.output = resp.Usage.InputTokens, resp.Usage.OutputTokens
			}
			reason := ""
			if resp.IncompleteDetails != nil {
				reason = resp.IncompleteDetails.Reason
			}
			a.finish = []string{contract.ResponseFinishReason(resp.Status, reason, len(resp.FunctionCalls()) > 0)}
			endSpan(span, attrs, err, a)
		}()
	}
	if err := h.stall(ctx); err != nil {
		return protocol.Response{}, err
	}
	if h.up != nil {
		return h.up.respond(ctx, req.ResponseCreateParams, h.ids.next())
	}
	return h.builtinResponse(ctx, req.ResponseCreateParams)
}

func (h *handler) chatCompletions(ctx context.Context, req ChatCompletionRequest) (resp json.RawMessage, err error) {
	ctx, span, attrs := h.startSpan(ctx, contract.SpanModelChatCompletions)
	var cc *ChatCompletion
	if span != nil {
		defer func() {
			var a answer
			if cc != nil {
				a.id, a.model = cc.ID, cc.Model
				if cc.Usage != nil {
					a.input, a.output = cc.Usage.PromptTokens, cc.Usage.CompletionTokens
				}
				a.finish = make([]string, len(cc.Choices))
				for i, c := range cc.Choices {
					a.finish[i] = c.FinishReason
				}
			}
			endSpan(span, attrs, err, a)
		}()
	}
	if err := h.stall(ctx); err != nil {
		return nil, err
	}
	if h.up != nil {
		resp, cc, err = h.up.chat(ctx, &req)
		return resp, err
	}
	cc, err = h.builtinChat(ctx, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(cc)
}

// think waits out the configured latency, or until the caller goes away.
func (h *handler) think(ctx context.Context) error {
	if h.cfg.LatencyMS <= 0 {
		return nil
	}
	return wait(ctx, time.Duration(h.cfg.LatencyMS*float64(time.Millisecond)), "simulated latency")
}

// stall waits out Config.StallSeconds, or until the caller goes away,
// when the call made with ctx is the first model call of a rollout whose
// task is in Config.StallTasks. The task is read from the rollout id the
// call carries (its /ng-rollout/<id>/ prefix, else its baggage: see
// server.RequestRolloutID), which names it when the id is upstream's
// "<task index>-<rollout index>" (protocol.TaskIndexOfRolloutID). The
// first call of an episode is the one without this server's session
// cookie: an agent sends back the cookies of the model's previous answer
// (upstream's simple_agent starts an episode with model_server_cookies
// None and keeps each answer's, nemo_gym 0.7.0
// responses_api_agents/simple_agent/app.py:161-178), so only its first
// call comes without. A server without a session
// cookie (not built with ServerOptions) stalls every call of the task.
func (h *handler) stall(ctx context.Context) error {
	if h.stallTasks == nil {
		return nil
	}
	task, ok := protocol.TaskIndexOfRolloutID(server.RequestRolloutID(ctx))
	if !ok || !h.stallTasks[task] || continuesSession(ctx) {
		return nil
	}
	return wait(ctx, h.stallFor, "a configured stall")
}

// continuesSession reports whether the request handled with ctx carried
// the server's session cookie. The session middleware keeps a valid id
// the caller sent and mints a fresh random one otherwise, so a cookie of
// the request holding the session id is the caller's own.
func continuesSession(ctx context.Context) bool {
	id, r := server.SessionID(ctx), server.Request(ctx)
	if id == "" || r == nil {
		return false
	}
	for _, c := range r.Cookies() {
		if c.Value == id {
			return true
		}
	}
	return false
}

// wait waits d, or until ctx ends; what names the wait in the error.
func wait(ctx context.Context, d time.Duration, what string) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("model: request abandoned during %s: %w", what, ctx.Err())
	}
}

// builtinResponse answers with the deterministic policy after the
// configured latency.
func (h *handler) builtinResponse(ctx context.Context, p protocol.ResponseCreateParams) (protocol.Response, error) {
	if err := h.think(ctx); err != nil {
		return protocol.Response{}, err
	}
	turn := Decide(h.cfg.Seed, h.cfg.CorrectProbability, p.Input, p.Tools)
	id := h.ids.next()
	var item protocol.Item
	var words int
	if turn.Call != nil {
		item = protocol.FunctionCall("fc_"+id, "call_"+id, turn.Call.Name, turn.Call.Arguments)
		words = countWords(turn.Call.Name) + countWords(turn.Call.Arguments)
	} else {
		item = protocol.AssistantMessage("msg_"+id, turn.Text)
		words = countWords(turn.Text)
	}
	return protocol.Response{
		ID:                "resp_" + id,
		Object:            protocol.ObjectResponse,
		CreatedAt:         float64(time.Now().Unix()),
		Model:             h.cfg.Model,
		Output:            []protocol.Item{item},
		ParallelToolCalls: p.EffectiveParallelToolCalls(),
		ToolChoice:        p.EffectiveToolChoice(),
		Tools:             p.EffectiveTools(),
		Status:            protocol.ResponseCompleted,
		Usage:             protocol.NewUsage(inputWords(p.Instructions, p.Input.AsItems()), words),
		Instructions:      p.Instructions,
		Temperature:       p.Temperature,
		TopP:              p.TopP,
		MaxOutputTokens:   p.MaxOutputTokens,
		Metadata:          p.Metadata,
	}, nil
}

// builtinChat answers a chat request with the same policy: the
// conversation is read as Responses input items, and a function call
// becomes the message's one tool call.
func (h *handler) builtinChat(ctx context.Context, req ChatCompletionRequest) (*ChatCompletion, error) {
	if err := h.think(ctx); err != nil {
		return nil, err
	}
	items := chatItems(req.Messages)
	turn := Decide(h.cfg.Seed, h.cfg.CorrectProbability, protocol.ItemsInput(items...), chatToolsAsResponses(req.Tools))
	id := h.ids.next()
	msg := ChatCompletionMessage{Role: protocol.RoleAssistant}
	finish, words := FinishStop, 0
	if turn.Call != nil {
		msg.ToolCalls = []ChatToolCall{{ID: "call_" + id, Type: "function",
			Function: ChatFunctionCall{Name: turn.Call.Name, Arguments: turn.Call.Arguments}}}
		finish, words = FinishToolCalls, countWords(turn.Call.Name)+countWords(turn.Call.Arguments)
	} else {
		text := turn.Text
		msg.Content, words = &text, countWords(text)
	}
	in := inputWords(nil, items)
	return &ChatCompletion{
		ID:      "chatcmpl-" + id,
		Object:  ObjectChatCompletion,
		Created: time.Now().Unix(),
		Model:   h.cfg.Model,
		Choices: []ChatChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage:   &ChatUsage{PromptTokens: in, CompletionTokens: words, TotalTokens: in + words},
	}, nil
}

// idSource mints response IDs: a random per-server prefix and a counter,
// so no lock and no shared random state is touched per request.
type idSource struct {
	prefix string
	n      atomic.Uint64
}

func newIDSource() *idSource {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &idSource{prefix: fmt.Sprintf("%x", b)}
}

func (s *idSource) next() string {
	return s.prefix + strconv.FormatUint(s.n.Add(1), 16)
}
