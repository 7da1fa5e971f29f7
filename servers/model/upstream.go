package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// Paths appended to the upstream base URL.
const (
	ChatCompletionsPath = "/v1/chat/completions"
	ResponsesPath       = "/v1/responses"
)

// maxUpstreamBody bounds how much of an upstream answer is read.
const maxUpstreamBody = 16 << 20

// endpoint is one upstream URL with what its CLIENT span needs.
type endpoint struct {
	url      string               // full URL, possibly with a query string
	safe     string               // url as it may be shown
	spanName string               // the CLIENT span's name
	attrs    []attribute.KeyValue // the CLIENT span's attributes; read-only
}

func newEndpoint(base *url.URL, path string) endpoint {
	u := *base
	u.Path, u.RawPath = base.Path+path, ""
	safe := lens.SafeURL(&u)
	attrs := []attribute.KeyValue{
		attribute.String(contract.AttrHTTPRequestMethod, http.MethodPost),
		attribute.String(contract.AttrURLFull, safe),
		attribute.String(contract.AttrServerAddress, u.Hostname()),
	}
	if port, _ := strconv.Atoi(u.Port()); port != 0 {
		attrs = append(attrs, attribute.Int(contract.AttrServerPort, port))
	}
	return endpoint{url: u.String(), safe: safe, spanName: contract.ClientSpanName(http.MethodPost), attrs: attrs}
}

// upstream forwards requests to an OpenAI-compatible endpoint. The key
// lives only here and in the Authorization header it writes; every
// message this type produces passes through scrub.
type upstream struct {
	chatEP, responsesEP endpoint
	api                 string
	key                 string
	model               string
	timeout             time.Duration
	http                *http.Client
}

func newUpstream(cfg UpstreamConfig, key string) (*upstream, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, errors.New("model: upstream base URL is not a valid URL")
	}
	base := *u
	base.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	base.RawPath = ""
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &upstream{
		chatEP:      newEndpoint(&base, ChatCompletionsPath),
		responsesEP: newEndpoint(&base, ResponsesPath),
		api:         cfg.API,
		key:         key,
		model:       cfg.Model,
		timeout:     time.Duration(cfg.TimeoutMS * float64(time.Millisecond)),
		http:        &http.Client{Transport: tr},
	}, nil
}

// respond answers a Responses request through the configured upstream
// API.
func (u *upstream) respond(ctx context.Context, p protocol.ResponseCreateParams, id string) (protocol.Response, error) {
	if u.api == APIResponses {
		return u.forwardResponses(ctx, p)
	}
	return u.viaChat(ctx, p, id)
}

// forwardResponses posts the request, as it came and with model
// replaced, to the upstream's Responses API, and hands back its answer
// once it passes NeMo Gym's response schema.
func (u *upstream) forwardResponses(ctx context.Context, p protocol.ResponseCreateParams) (protocol.Response, error) {
	model := u.model
	p.Model = &model
	body, err := json.Marshal(p)
	if err != nil {
		return protocol.Response{}, fmt.Errorf("model: encode upstream request: %w", err)
	}
	raw, err := u.post(ctx, u.responsesEP, body)
	if err != nil {
		return protocol.Response{}, err
	}
	var r protocol.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(raw) {
			return protocol.Response{}, u.fail(http.StatusBadGateway,
				"upstream model at %s answered a body that is not a Responses API response (not JSON)", u.responsesEP.safe)
		}
		// A member of the wrong kind (an object where a string belongs).
		err = protocol.DecodeError(err)
		return protocol.Response{}, u.fail(http.StatusBadGateway,
			"upstream model at %s answered a response that fails the NeMo Gym response schema: %v", u.responsesEP.safe, err)
	}
	if err := r.Validate(); err != nil {
		return protocol.Response{}, u.fail(http.StatusBadGateway,
			"upstream model at %s answered a response that fails the NeMo Gym response schema: %v", u.responsesEP.safe, err)
	}
	return r, nil
}

// upstreamChatRequest is what a Responses request becomes for the
// upstream's chat completions.
type upstreamChatRequest struct {
	Model             string          `json:"model"`
	Messages          []ChatMessage   `json:"messages"`
	Tools             []ChatTool      `json:"tools,omitempty"`
	ToolChoice        json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
}

// viaChat translates a Responses request to a chat completion call and
// maps the first choice back: its text as an assistant message, its tool
// calls as function_call items.
func (u *upstream) viaChat(ctx context.Context, p protocol.ResponseCreateParams, id string) (protocol.Response, error) {
	req := upstreamChatRequest{Model: u.model, Messages: chatMessages(p.Instructions, p.Input.AsItems()),
		Tools: chatTools(p.Tools), Temperature: p.Temperature, TopP: p.TopP, MaxTokens: p.MaxOutputTokens}
	if len(req.Tools) > 0 {
		// OpenAI refuses both without tools.
		req.ToolChoice, req.ParallelToolCalls = chatToolChoice(p.ToolChoice), p.ParallelToolCalls
	}
	body, err := json.Marshal(req)
	if err != nil {
		return protocol.Response{}, fmt.Errorf("model: encode upstream request: %w", err)
	}
	raw, err := u.post(ctx, u.chatEP, body)
	if err != nil {
		return protocol.Response{}, err
	}
	cc, problem := checkChatCompletion(raw)
	if problem != "" {
		return protocol.Response{}, u.fail(http.StatusBadGateway,
			"upstream model at %s answered a body that is not a chat completion: %s", u.chatEP.safe, problem)
	}
	if len(cc.Choices) == 0 {
		return protocol.Response{}, u.fail(http.StatusBadGateway, "upstream model at %s answered without choices", u.chatEP.safe)
	}
	choice := cc.Choices[0]
	var output []protocol.Item
	text := ""
	if choice.Message.Content != nil {
		text = *choice.Message.Content
	}
	if text != "" || len(choice.Message.ToolCalls) == 0 {
		output = append(output, protocol.AssistantMessage("msg_"+id, text))
	}
	for i, c := range choice.Message.ToolCalls {
		output = append(output, protocol.FunctionCall(fmt.Sprintf("fc_%s_%d", id, i), c.ID, c.Function.Name, c.Function.Arguments))
	}
	resp := protocol.Response{
		ID: "resp_" + id, Object: protocol.ObjectResponse, CreatedAt: float64(cc.Created), Model: cc.Model,
		Output: output, ParallelToolCalls: p.EffectiveParallelToolCalls(), ToolChoice: p.EffectiveToolChoice(),
		Tools: p.EffectiveTools(), Status: protocol.ResponseCompleted, Usage: cc.Usage.responses(),
		Instructions: p.Instructions, Temperature: p.Temperature, TopP: p.TopP,
		MaxOutputTokens: p.MaxOutputTokens, Metadata: p.Metadata,
	}
	switch choice.FinishReason {
	case FinishLength:
		resp.Status = protocol.ResponseIncomplete
		resp.IncompleteDetails = &protocol.IncompleteDetails{Reason: "max_output_tokens"}
	case FinishContentFilter:
		resp.Status = protocol.ResponseIncomplete
		resp.IncompleteDetails = &protocol.IncompleteDetails{Reason: "content_filter"}
	}
	if resp.Model == "" {
		resp.Model = u.model
	}
	if resp.CreatedAt == 0 {
		resp.CreatedAt = float64(time.Now().Unix())
	}
	return resp, nil
}

// chat forwards a chat request, as upstream's model server does: the
// declared members that arrived, as its model holds them once validated,
// model replaced. The answer goes back as it came once it passes the
// chat completion model upstream checks it against.
func (u *upstream) chat(ctx context.Context, req *ChatCompletionRequest) (json.RawMessage, *ChatCompletion, error) {
	fwd, err := req.forwardBody(u.model)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	body, err := json.Marshal(fwd)
	if err != nil {
		return nil, nil, fmt.Errorf("model: encode upstream request: %w", err)
	}
	raw, err := u.post(ctx, u.chatEP, body)
	if err != nil {
		return nil, nil, err
	}
	cc, problem := checkChatCompletion(raw)
	if problem != "" {
		return nil, nil, u.fail(http.StatusBadGateway,
			"upstream model at %s answered a body that is not a chat completion: %s", u.chatEP.safe, problem)
	}
	return raw, cc, nil
}

// checkChatCompletion validates a chat completion as upstream's model
// server validates its endpoint's answer (protocol.ValidateChatCompletion,
// lax as pydantic is) and reads the members this server uses. The
// problem names locations and rules only: values may quote the prompt.
func checkChatCompletion(raw []byte) (*ChatCompletion, string) {
	if !json.Valid(raw) {
		return nil, "the body is not JSON"
	}
	if err := protocol.ValidateChatCompletion(raw); err != nil {
		var ve *protocol.ValidationError
		if !errors.As(err, &ve) || len(ve.Detail) == 0 {
			return nil, "it fails the chat completion schema"
		}
		d := ve.Detail[0]
		where := protocol.LocString(d.Loc)
		switch {
		case where == "":
			return nil, "the body is not a JSON object"
		case d.Type == protocol.ErrMissing:
			return nil, "member " + where + " is missing"
		}
		return nil, "member " + where + ": " + d.Msg
	}
	return readChatCompletion(raw), ""
}

// readChatCompletion reads a chat completion that passed
// ValidateChatCompletion: members by their exact names, a repeated one by
// its last value (as Python's json module reads them), numbers by
// pydantic's lax rules (protocol.LaxInt).
func readChatCompletion(raw []byte) *ChatCompletion {
	top := exactMembers(raw)
	cc := &ChatCompletion{ID: jsonString(top["id"]), Object: jsonString(top["object"]), Model: jsonString(top["model"])}
	if n, ok := protocol.LaxInt(top["created"]); ok {
		cc.Created = int64(n)
	}
	var choices []json.RawMessage
	_ = json.Unmarshal(top["choices"], &choices)
	for _, c := range choices {
		cm := exactMembers(c)
		choice := ChatChoice{FinishReason: jsonString(cm["finish_reason"])}
		choice.Index, _ = protocol.LaxInt(cm["index"])
		mm := exactMembers(cm["message"])
		choice.Message.Role = jsonString(mm["role"])
		if !isJSONNull(mm["content"]) && len(mm["content"]) > 0 {
			text := jsonString(mm["content"])
			choice.Message.Content = &text
		}
		var calls []json.RawMessage
		_ = json.Unmarshal(mm["tool_calls"], &calls)
		for _, call := range calls {
			tm := exactMembers(call)
			fm := exactMembers(tm["function"])
			choice.Message.ToolCalls = append(choice.Message.ToolCalls, ChatToolCall{ID: jsonString(tm["id"]), Type: jsonString(tm["type"]),
				Function: ChatFunctionCall{Name: jsonString(fm["name"]), Arguments: jsonString(fm["arguments"])}})
		}
		cc.Choices = append(cc.Choices, choice)
	}
	if u := top["usage"]; len(u) > 0 && !isJSONNull(u) {
		um := exactMembers(u)
		usage := &ChatUsage{}
		usage.PromptTokens, _ = protocol.LaxInt(um["prompt_tokens"])
		usage.CompletionTokens, _ = protocol.LaxInt(um["completion_tokens"])
		usage.TotalTokens, _ = protocol.LaxInt(um["total_tokens"])
		if n, ok := protocol.LaxInt(exactMembers(um["prompt_tokens_details"])["cached_tokens"]); ok {
			usage.PromptTokensDetails = &ChatPromptTokensDetails{CachedTokens: &n}
		}
		if n, ok := protocol.LaxInt(exactMembers(um["completion_tokens_details"])["reasoning_tokens"]); ok {
			usage.CompletionTokensDetails = &ChatCompletionTokensDetails{ReasoningTokens: &n}
		}
		cc.Usage = usage
	}
	return cc
}

// exactMembers is the object raw's members by exact name, the last of a
// repeated one winning; nil when raw is not an object.
func exactMembers(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// jsonString is the JSON string raw, or "" when it is not one.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// upstreamClientKind starts the CLIENT span of an upstream call; its
// attributes are set once the span is known to record.
var upstreamClientKind = trace.WithSpanKind(trace.SpanKindClient)

// post makes one upstream call and returns the 2xx body. Failures are
// *server.Error values: 504 when the upstream did not answer in time, 429
// when it rate-limited us, 502 for anything else (unreachable, a non-2xx
// answer, an unreadable body).
func (u *upstream) post(ctx context.Context, ep endpoint, body []byte) (raw []byte, err error) {
	status := 0 // the upstream's answer, for the CLIENT span
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()

	var span trace.Span
	if ctx, span = lens.StartRecording(ctx, telemetry.GroupHTTPClient, ep.spanName, upstreamClientKind); span != nil {
		attrs := lens.NewAttrs() // set in one call as the span ends
		attrs.Add(ep.attrs...)
		if id := server.RequestRolloutID(ctx); id != "" {
			attrs.Add(attribute.String(contract.AttrRolloutID, id))
		}
		defer func() {
			if status != 0 {
				attrs.Add(attribute.Int(contract.AttrHTTPResponseStatus, status))
			}
			attrs.SetOn(span)
			lens.End(span, err)
		}()
	}

	r, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return nil, u.fail(http.StatusBadGateway, "cannot build the upstream request")
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	if u.key != "" {
		r.Header.Set("Authorization", "Bearer "+u.key)
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))

	res, err := u.http.Do(r)
	if err != nil {
		return nil, u.transportError(ctx, ep, err)
	}
	defer res.Body.Close()
	status = res.StatusCode
	raw, err = io.ReadAll(io.LimitReader(res.Body, maxUpstreamBody))
	if err != nil {
		return nil, u.transportError(ctx, ep, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, u.statusError(ep, res.StatusCode, raw)
	}
	return raw, nil
}

// transportError describes a call that got no complete answer. The
// *url.Error the client returns is unwrapped: its text repeats the full
// URL, query string included.
func (u *upstream) transportError(ctx context.Context, ep endpoint, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// A call out of the fleet: gym.http.timeout_total{internal=false}.
		metrics.RecordHTTPTimeout(false)
		return u.fail(http.StatusGatewayTimeout, "upstream model at %s did not answer within %v", ep.safe, u.timeout)
	case ctx.Err() != nil:
		return u.fail(http.StatusBadGateway, "upstream call to %s abandoned: %v", ep.safe, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return u.fail(http.StatusBadGateway, "upstream model at %s unreachable: %v", ep.safe, err)
}

// statusError describes a non-2xx upstream answer by its status and, when
// the body is an OpenAI error object, its type and code. The upstream's
// message is left out: providers quote (part of) the key in it.
func (u *upstream) statusError(ep endpoint, status int, raw []byte) error {
	var eb struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	detail := ""
	if json.Unmarshal(raw, &eb) == nil {
		var parts []string
		if eb.Error.Type != "" {
			parts = append(parts, "type "+eb.Error.Type)
		}
		switch c := eb.Error.Code.(type) {
		case string:
			if c != "" {
				parts = append(parts, "code "+c)
			}
		case float64:
			parts = append(parts, "code "+strconv.FormatFloat(c, 'f', -1, 64))
		}
		if len(parts) > 0 {
			detail = " (" + strings.Join(parts, ", ") + ")"
		}
	}
	out := http.StatusBadGateway
	if status == http.StatusTooManyRequests {
		out = http.StatusTooManyRequests
	}
	return u.fail(out, "upstream model at %s answered %d %s%s", ep.safe, status, http.StatusText(status), detail)
}

// fail builds a *server.Error whose message cannot hold the API key.
func (u *upstream) fail(status int, format string, args ...any) error {
	return &server.Error{Status: status, Message: u.scrub(fmt.Sprintf(format, args...))}
}

func (u *upstream) scrub(s string) string {
	if u.key == "" {
		return s
	}
	return strings.ReplaceAll(s, u.key, lens.Redacted)
}
