package metrics

import (
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/telemetry"
)

// GenAICall is one GenAI client operation (a model call), as the
// OpenTelemetry GenAI semantic conventions describe it. Empty strings and
// a zero ServerPort leave their attribute out.
type GenAICall struct {
	// Operation is gen_ai.operation.name (contract.GenAIOperationChat).
	Operation string
	// Provider is gen_ai.provider.name ("openai", ...).
	Provider string
	// RequestModel and ResponseModel are gen_ai.request.model and
	// gen_ai.response.model; RecordGenAI records them through
	// telemetry.ModelName.
	RequestModel, ResponseModel string
	// ServerAddress and ServerPort are where the call went.
	ServerAddress string
	// ErrorType is error.type for a failed call ("" for a successful one):
	// an HTTP status code, an exception class, "timeout".
	ErrorType  string
	ServerPort int
	// Duration is the operation's wall time.
	Duration time.Duration
	// InputTokens and OutputTokens are the usage the answer reported; a
	// negative count is unknown and not recorded.
	InputTokens, OutputTokens int64
}

// genAIKey is GenAICall's attribute values, the cache key.
type genAIKey struct {
	op, provider, reqModel, respModel, addr, errType string
	port                                             int
}

// genAIOverflow keeps whether the call failed: an overflowed failure is
// still a failure (error.type _OTHER), an overflowed success has no
// error.type.
func genAIOverflow(k genAIKey) genAIKey {
	o := genAIKey{op: contract.Other, provider: contract.Other, reqModel: contract.Other,
		respModel: contract.Other, addr: contract.Other}
	if k.errType != "" {
		o.errType = contract.Other
	}
	return o
}

// genAIOpts are the three attribute sets of one call: the duration's
// (with error.type) and the token usage's by token type (without it, as
// the conventions list them).
type genAISeries struct {
	duration      lens.BoundHistogram[float64]
	input, output lens.BoundHistogram[int64]
}

var genAICache = newCache(genAIOverflow, func(k genAIKey) *binding[genAISeries] {
	var common []attribute.KeyValue
	str := func(key, v string) {
		if v != "" {
			common = append(common, attribute.String(key, v))
		}
	}
	str(contract.AttrGenAIOperationName, k.op)
	str(contract.AttrGenAIProviderName, k.provider)
	str(contract.AttrGenAIRequestModel, k.reqModel)
	str(contract.AttrGenAIResponseModel, k.respModel)
	str(contract.AttrServerAddress, k.addr)
	if k.port > 0 {
		common = append(common, attribute.Int(contract.AttrServerPort, k.port))
	}
	with := func(extra attribute.KeyValue) attribute.Set {
		kv := append(append([]attribute.KeyValue(nil), common...), extra)
		return attribute.NewSet(kv...)
	}
	input := with(attribute.String(contract.AttrGenAITokenType, contract.GenAITokenTypeInput))
	output := with(attribute.String(contract.AttrGenAITokenType, contract.GenAITokenTypeOutput))
	duration := attribute.NewSet(common...)
	if k.errType != "" {
		duration = with(attribute.String(contract.AttrErrorType, k.errType))
	}
	return newBinding(func(ins *gym.Instruments) genAISeries {
		return genAISeries{ins.GenAIDuration.Bind(duration), ins.GenAITokens.Bind(input), ins.GenAITokens.Bind(output)}
	})
})

// RecordGenAI records one GenAI client operation into
// gen_ai.client.operation.duration (seconds) and, for each known token
// count, gen_ai.client.token.usage by gen_ai.token.type. A negative
// duration records nothing.
func RecordGenAI(c GenAICall) {
	if telemetry.Recording() {
		recordGenAI(&c)
	}
}

func recordGenAI(c *GenAICall) {
	ins := telemetry.Instruments()
	if ins == nil || c.Duration < 0 {
		return
	}
	defer guard()
	// The model names may come from an upstream's answer: bounded and
	// cleaned before they become attribute values.
	s := genAICache.get(genAIKey{op: c.Operation, provider: c.Provider, reqModel: telemetry.ModelName(c.RequestModel),
		respModel: telemetry.ModelName(c.ResponseModel), addr: c.ServerAddress, errType: c.ErrorType, port: c.ServerPort}).in(ins)
	s.duration.Record(c.Duration.Seconds())
	if c.InputTokens >= 0 {
		s.input.Record(c.InputTokens)
	}
	if c.OutputTokens >= 0 {
		s.output.Record(c.OutputTokens)
	}
}
