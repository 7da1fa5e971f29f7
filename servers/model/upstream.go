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

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// ChatCompletionsPath is appended to Upstream.BaseURL.
const ChatCompletionsPath = "/v1/chat/completions"

// maxUpstreamBody bounds how much of an upstream answer is read.
const maxUpstreamBody = 16 << 20

// upstream forwards requests to an OpenAI-compatible chat completions
// endpoint. The key lives only here and in the Authorization header it
// writes; every message this type produces passes through scrub.
type upstream struct {
	endpoint string               // full URL, possibly with a query string
	safe     string               // endpoint as it may be shown
	spanName string               // the CLIENT span's name
	attrs    []attribute.KeyValue // the CLIENT span's attributes; read-only
	key      string
	model    string
	timeout  time.Duration
	http     *http.Client
}

func newUpstream(cfg UpstreamConfig, key string) (*upstream, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, errors.New("model: upstream.base_url is not a valid URL")
	}
	path := strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(path, "/v1") {
		path = strings.TrimSuffix(path, "/v1")
	}
	u.Path, u.RawPath = path+ChatCompletionsPath, ""
	safe := lens.SafeURL(u)
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("url.full", safe),
		attribute.String("server.address", u.Hostname()),
	}
	if port, _ := strconv.Atoi(u.Port()); port != 0 {
		attrs = append(attrs, attribute.Int("server.port", port))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &upstream{
		endpoint: u.String(),
		safe:     safe,
		spanName: http.MethodPost + " " + u.Path,
		attrs:    attrs,
		key:      key,
		model:    cfg.Model,
		timeout:  time.Duration(cfg.TimeoutMS * float64(time.Millisecond)),
		http:     &http.Client{Transport: tr},
	}, nil
}

// chatMessage, chatRequest and chatResponse are the parts of the OpenAI
// chat completions format the server writes and reads.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message      chatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// complete makes one upstream call and maps its first choice to a
// Responses answer. Failures are *server.Error values: 504 when the
// upstream did not answer in time, 429 when it rate-limited us, 502 for
// anything else (unreachable, a non-2xx answer, an unreadable body).
func (u *upstream) complete(ctx context.Context, req protocol.ResponsesRequest, id string) (resp protocol.ResponsesResponse, err error) {
	msgs := make([]chatMessage, len(req.Input))
	for i, m := range req.Input {
		msgs[i] = chatMessage(m)
	}
	body, err := json.Marshal(chatRequest{Model: u.model, Messages: msgs, Temperature: req.Temperature, MaxTokens: req.MaxOutputTokens})
	if err != nil {
		return resp, fmt.Errorf("model: encode upstream request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()

	if lens.Enabled(telemetry.GroupHTTPClient) {
		var span trace.Span
		ctx, span = lens.Start(ctx, telemetry.GroupHTTPClient, u.spanName,
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(u.attrs...))
		defer func() {
			if s := server.StatusOf(err); s != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", s))
			}
			lens.End(span, err)
		}()
	}

	r, err := http.NewRequestWithContext(ctx, http.MethodPost, u.endpoint, bytes.NewReader(body))
	if err != nil {
		return resp, u.fail(http.StatusBadGateway, "cannot build the upstream request")
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	if u.key != "" {
		r.Header.Set("Authorization", "Bearer "+u.key)
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))

	res, err := u.http.Do(r)
	if err != nil {
		return resp, u.transportError(ctx, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxUpstreamBody))
	if err != nil {
		return resp, u.transportError(ctx, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return resp, u.statusError(res.StatusCode, raw)
	}
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil {
		return resp, u.fail(http.StatusBadGateway, "upstream model at %s answered a body that is not a chat completion", u.safe)
	}
	if len(cr.Choices) == 0 {
		return resp, u.fail(http.StatusBadGateway, "upstream model at %s answered without choices", u.safe)
	}
	choice := cr.Choices[0]
	status := "completed"
	if choice.FinishReason == "length" {
		status = "incomplete"
	}
	model := cr.Model
	if model == "" {
		model = u.model
	}
	usage := protocol.Usage{
		InputTokens:  cr.Usage.PromptTokens,
		OutputTokens: cr.Usage.CompletionTokens,
		TotalTokens:  cr.Usage.TotalTokens,
	}
	if usage.TotalTokens == 0 {
		usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	}
	return newResponse(id, model, status, choice.Message.Content, usage), nil
}

// transportError describes a call that got no complete answer. The
// *url.Error the client returns is unwrapped: its text repeats the full
// URL, query string included.
func (u *upstream) transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return u.fail(http.StatusGatewayTimeout, "upstream model at %s did not answer within %v", u.safe, u.timeout)
	case ctx.Err() != nil:
		return u.fail(http.StatusBadGateway, "upstream call to %s abandoned: %v", u.safe, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return u.fail(http.StatusBadGateway, "upstream model at %s unreachable: %v", u.safe, err)
}

// statusError describes a non-2xx upstream answer by its status and, when
// the body is an OpenAI error object, its type and code. The upstream's
// message is left out: providers quote (part of) the key in it.
func (u *upstream) statusError(status int, raw []byte) error {
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
	return u.fail(out, "upstream model at %s answered %d %s%s", u.safe, status, http.StatusText(status), detail)
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
