package model

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	randv2 "math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// ServerName is the name this server has in a fleet configuration.
const ServerName = "policy_model"

// SpanName is the name of the span around one /v1/responses request.
const SpanName = "gym.model.responses"

// Span attribute keys set on the gym.model.responses span.
const (
	AttrRequestModel  = "gen_ai.request.model"
	AttrResponseModel = "gen_ai.response.model"
	AttrInputTokens   = "gen_ai.usage.input_tokens"
	AttrOutputTokens  = "gen_ai.usage.output_tokens"
	AttrMode          = "nemo.gym.model.mode"
)

// Values of AttrMode.
const (
	ModeBuiltin  = "builtin"
	ModeUpstream = "upstream"
)

// DontKnow is the built-in policy's answer to a message it cannot parse.
const DontKnow = "I don't know"

// Register validates cfg and registers POST /v1/responses on s. In
// upstream mode the API key is resolved here, once: from
// cfg.Upstream.APIKey, else from the variable cfg.Upstream.APIKeyEnv names.
func Register(s *server.Server, cfg Config) error {
	if s == nil {
		return errors.New("model: nil server")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	h := &handler{cfg: cfg, mode: ModeBuiltin, ids: newIDSource()}
	if cfg.Upstream.BaseURL != "" {
		key := cfg.Upstream.APIKey
		if key == "" {
			key = os.Getenv(cfg.Upstream.APIKeyEnv)
		}
		up, err := newUpstream(cfg.Upstream, key)
		if err != nil {
			return err
		}
		h.up, h.mode = up, ModeUpstream
	}
	server.Handle(s, protocol.RouteResponses, h.handle)
	return nil
}

type handler struct {
	cfg  Config
	mode string
	up   *upstream // nil in built-in mode
	ids  *idSource
}

func (h *handler) requestModel() string {
	if h.up != nil {
		return h.up.model
	}
	return h.cfg.Model
}

func (h *handler) handle(ctx context.Context, req protocol.ResponsesRequest) (resp protocol.ResponsesResponse, err error) {
	var span trace.Span
	if lens.Enabled(telemetry.GroupModelCall) {
		ctx, span = lens.Start(ctx, telemetry.GroupModelCall, SpanName, trace.WithAttributes(
			attribute.String(AttrRequestModel, h.requestModel()),
			attribute.String(AttrMode, h.mode),
		))
		if id := telemetry.RolloutIDFrom(ctx); id != "" {
			span.SetAttributes(attribute.String(telemetry.AttrRolloutID, id))
		}
		defer func() {
			if err == nil {
				span.SetAttributes(
					attribute.String(AttrResponseModel, resp.Model),
					attribute.Int(AttrInputTokens, resp.Usage.InputTokens),
					attribute.Int(AttrOutputTokens, resp.Usage.OutputTokens),
				)
			}
			lens.End(span, err)
		}()
	}
	if h.up != nil {
		return h.up.complete(ctx, req, h.ids.next())
	}
	return h.builtin(ctx, req)
}

// builtin answers with the deterministic policy after the configured
// latency.
func (h *handler) builtin(ctx context.Context, req protocol.ResponsesRequest) (protocol.ResponsesResponse, error) {
	if h.cfg.LatencyMS > 0 {
		t := time.NewTimer(time.Duration(h.cfg.LatencyMS * float64(time.Millisecond)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return protocol.ResponsesResponse{}, fmt.Errorf("model: request abandoned during simulated latency: %w", ctx.Err())
		}
	}
	question := lastUserText(req.Input)
	text := Answer(h.cfg.Seed, h.cfg.CorrectProbability, question)
	in := 0
	for _, m := range req.Input {
		in += countWords(m.Content)
	}
	out := countWords(text)
	return newResponse(h.ids.next(), h.cfg.Model, "completed", text,
		protocol.Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}), nil
}

// newResponse builds a Responses API answer holding one assistant message.
func newResponse(id, model, status, text string, usage protocol.Usage) protocol.ResponsesResponse {
	return protocol.ResponsesResponse{
		ID:     "resp_" + id,
		Object: "response",
		Model:  model,
		Status: status,
		Output: []protocol.OutputItem{{
			Type:    "message",
			ID:      "msg_" + id,
			Role:    "assistant",
			Status:  status,
			Content: []protocol.OutputContent{{Type: "output_text", Text: text}},
		}},
		Usage: usage,
	}
}

// lastUserText returns the content of the last user message, or of the
// last message when none has the user role.
func lastUserText(in []protocol.InputMessage) string {
	for i := len(in) - 1; i >= 0; i-- {
		if in[i].Role == "user" {
			return in[i].Content
		}
	}
	if len(in) == 0 {
		return ""
	}
	return in[len(in)-1].Content
}

// questionRE finds the first "a op b" with integer operands.
var questionRE = regexp.MustCompile(`(-?\d+)\s*([-+*])\s*(-?\d+)`)

// Solve finds the first "a + b", "a - b" or "a * b" on integers in text
// (as in "What is 17 + 25?") and returns its value; ok is false when text
// holds no such expression. Operands of any size are handled exactly.
func Solve(text string) (result *big.Int, ok bool) {
	m := questionRE.FindStringSubmatch(text)
	// Operands thousands of digits long would cost seconds of CPU.
	if m == nil || len(m[1]) > 4096 || len(m[3]) > 4096 {
		return nil, false
	}
	a, okA := new(big.Int).SetString(m[1], 10)
	b, okB := new(big.Int).SetString(m[3], 10)
	if !okA || !okB {
		return nil, false
	}
	switch m[2] {
	case "+":
		return a.Add(a, b), true
	case "-":
		return a.Sub(a, b), true
	default:
		return a.Mul(a, b), true
	}
}

// Answer is the built-in policy: the reply to question under seed. It is
// "The answer is N." with N correct with probability pCorrect and otherwise
// off by 1 to 10 either way, or DontKnow when question holds no
// expression Solve understands. The same (seed, question) always gets the
// same reply; the draw uses a generator local to the call, seeded from a
// hash of both, so concurrent calls share no state.
func Answer(seed int64, pCorrect float64, question string) string {
	want, ok := Solve(question)
	if !ok {
		return DontKnow
	}
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(question))
	sum := h.Sum64()
	var src randv2.PCG
	src.Seed(sum, sum^0x9e3779b97f4a7c15)
	r := randv2.New(&src)
	if r.Float64() >= pCorrect {
		off := int64(r.IntN(10) + 1)
		if r.IntN(2) == 0 {
			off = -off
		}
		want.Add(want, big.NewInt(off))
	}
	return "The answer is " + want.String() + "."
}

// countWords counts whitespace-separated words: the servers' rough token
// count.
func countWords(s string) int {
	n, in := 0, false
	for _, c := range s {
		space := c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x85 || c == 0xA0
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
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
