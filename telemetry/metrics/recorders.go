package metrics

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/telemetry"
)

// background is the context every recording uses: the recorders take
// none, and the SDK reads no exemplar from it with exemplars off.
var background = context.Background()

// pair is the key of a recorder with two attribute values.
type pair struct{ a, b string }

func otherPair(pair) pair { return pair{contract.Other, contract.Other} }

func otherString(string) string { return contract.Other }

func pairCache(keyA, keyB string) *cache[pair, opts] {
	return newCache(otherPair, func(p pair) opts {
		return newOpts(attribute.NewSet(attribute.String(keyA, p.a), attribute.String(keyB, p.b)))
	})
}

func oneCache(key string) *cache[string, opts] {
	return newCache(otherString, func(v string) opts {
		return newOpts(attribute.NewSet(attribute.String(key, v)))
	})
}

var (
	modelCallOpts = pairCache(contract.AttrModelDialect, contract.AttrServerName)
	toolCallOpts  = pairCache(contract.AttrToolName, contract.AttrServerName)
	agentOpts     = oneCache(contract.AttrAgentName)
	siteOpts      = oneCache(contract.AttrConcurrencySite)

	timeoutInternal = newOpts(attribute.NewSet(attribute.Bool(contract.AttrHTTPInternal, true)))
	timeoutExternal = newOpts(attribute.NewSet(attribute.Bool(contract.AttrHTTPInternal, false)))

	retryDisconnected = retryReason(contract.RetryServerDisconnected)
	retryOSError      = retryReason(contract.RetryClientOSError)
	retryTimeout      = retryReason(contract.RetryTimeout)
	retryOther        = retryReason(contract.RetryOther)
)

func retryReason(r string) opts {
	return newOpts(attribute.NewSet(attribute.String(contract.AttrHTTPRetryReason, r)))
}

// guard drops a panic from below (the SDK, an exporter's view) so that no
// recorder ever fails its caller.
func guard() {
	if r := recover(); r != nil {
		slog.Debug("metrics: recording panicked; dropped", "panic", r)
	}
}

// RecordModelCall records one model call as its caller saw it:
// gym.model.call_duration_ms and, when firstByte is known (>= 0),
// gym.model.time_to_first_byte_ms, both by nemo.gym.model.dialect
// (contract.Dialect*) and nemo.gym.server.name (the model server). A
// negative total records nothing.
func RecordModelCall(dialect, serverName string, total, firstByte time.Duration) {
	if telemetry.Recording() {
		recordModelCall(dialect, serverName, total, firstByte)
	}
}

// The exported recorders are the gate and a call: small enough to be
// inlined at the call site, so a process that does not export pays one
// atomic load. The work is in the unexported ones, which load the
// instruments again (telemetry may have shut down in between).

func recordModelCall(dialect, serverName string, total, firstByte time.Duration) {
	ins := telemetry.Instruments()
	if ins == nil || total < 0 {
		return
	}
	defer guard()
	o := modelCallOpts.get(pair{dialect, serverName})
	ins.ModelCallDuration.Record(background, ms(total), o.rec...)
	if firstByte >= 0 {
		ins.ModelTimeToFirstByte.Record(background, ms(firstByte), o.rec...)
	}
}

// RecordHTTPTimeout counts one outgoing call that ran out of time in
// gym.http.timeout_total; internal says whether it went to a server of the
// fleet (nemo.gym.http.internal).
func RecordHTTPTimeout(internal bool) {
	if telemetry.Recording() {
		recordHTTPTimeout(internal)
	}
}

func recordHTTPTimeout(internal bool) {
	ins := telemetry.Instruments()
	if ins == nil {
		return
	}
	defer guard()
	if internal {
		ins.HTTPTimeouts.Add(background, 1, timeoutInternal.add...)
	} else {
		ins.HTTPTimeouts.Add(background, 1, timeoutExternal.add...)
	}
}

// RecordHTTPRetry counts one retried outgoing call in gym.http.retry_total
// by why its attempt failed: one of the contract.Retry* values; any other
// reason is counted as contract.RetryOther.
func RecordHTTPRetry(reason string) {
	if telemetry.Recording() {
		recordHTTPRetry(reason)
	}
}

func recordHTTPRetry(reason string) {
	ins := telemetry.Instruments()
	if ins == nil {
		return
	}
	defer guard()
	o := &retryOther
	switch reason {
	case contract.RetryServerDisconnected:
		o = &retryDisconnected
	case contract.RetryClientOSError:
		o = &retryOSError
	case contract.RetryTimeout:
		o = &retryTimeout
	}
	ins.HTTPRetries.Add(background, 1, o.add...)
}

// RecordAgentTurns records the number of model turns of one episode into
// gym.agent.turn_count, by nemo.gym.agent.name; call it once per episode.
// A negative count records nothing.
func RecordAgentTurns(agentName string, turns int) {
	if telemetry.Recording() {
		recordAgentTurns(agentName, turns)
	}
}

func recordAgentTurns(agentName string, turns int) {
	ins := telemetry.Instruments()
	if ins == nil || turns < 0 {
		return
	}
	defer guard()
	ins.AgentTurnCount.Record(background, float64(turns), agentOpts.get(agentName).rec...)
}

// RecordAgentTurn records the wall time of one model turn and its tool
// calls into gym.agent.turn_duration_ms, by nemo.gym.agent.name; call it
// once per turn. A negative duration records nothing.
func RecordAgentTurn(agentName string, d time.Duration) {
	if telemetry.Recording() {
		recordAgentTurn(agentName, d)
	}
}

func recordAgentTurn(agentName string, d time.Duration) {
	ins := telemetry.Instruments()
	if ins == nil || d < 0 {
		return
	}
	defer guard()
	ins.AgentTurnDuration.Record(background, ms(d), agentOpts.get(agentName).rec...)
}

// RecordToolCall records the wall time of one tool call into
// gym.tool.call_duration_ms, by nemo.gym.tool.name and nemo.gym.server.name
// (the server that ran the tool). A negative duration records nothing.
func RecordToolCall(toolName, serverName string, d time.Duration) {
	if telemetry.Recording() {
		recordToolCall(toolName, serverName, d)
	}
}

func recordToolCall(toolName, serverName string, d time.Duration) {
	ins := telemetry.Instruments()
	if ins == nil || d < 0 {
		return
	}
	defer guard()
	ins.ToolCallDuration.Record(background, ms(d), toolCallOpts.get(pair{toolName, serverName}).rec...)
}
