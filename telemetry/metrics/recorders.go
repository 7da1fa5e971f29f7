package metrics

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/telemetry"
)

// pair is the key of a recorder with two attribute values.
type pair struct{ a, b string }

func otherPair(pair) pair { return pair{contract.Other, contract.Other} }

func otherString(string) string { return contract.Other }

// pairCache and oneCache bind the set of one or two attribute values with
// bind.
func pairCache[B any](keyA, keyB string, bind func(*gym.Instruments, attribute.Set) B) *cache[pair, *binding[B]] {
	return newCache(otherPair, func(p pair) *binding[B] {
		set := attribute.NewSet(attribute.String(keyA, p.a), attribute.String(keyB, p.b))
		return newBinding(func(ins *gym.Instruments) B { return bind(ins, set) })
	})
}

func oneCache[B any](key string, bind func(*gym.Instruments, attribute.Set) B) *cache[string, *binding[B]] {
	return newCache(otherString, func(v string) *binding[B] {
		set := attribute.NewSet(attribute.String(key, v))
		return newBinding(func(ins *gym.Instruments) B { return bind(ins, set) })
	})
}

// counterOf binds one fixed set to the counter pick chooses.
func counterOf(pick func(*gym.Instruments) lens.Counter, kvs ...attribute.KeyValue) *binding[lens.BoundCounter] {
	set := attribute.NewSet(kvs...)
	return newBinding(func(ins *gym.Instruments) lens.BoundCounter { return pick(ins).Bind(set) })
}

type modelCallSeries struct{ duration, firstByte lens.BoundHistogram[float64] }

type agentSeries struct{ turns, turn lens.BoundHistogram[float64] }

type siteSeries struct {
	wait      lens.BoundHistogram[float64]
	cancelled lens.BoundCounter
}

func timeouts(ins *gym.Instruments) lens.Counter { return ins.HTTPTimeouts }

func retries(ins *gym.Instruments) lens.Counter { return ins.HTTPRetries }

var (
	modelCalls = pairCache(contract.AttrModelDialect, contract.AttrServerName, func(ins *gym.Instruments, set attribute.Set) modelCallSeries {
		return modelCallSeries{ins.ModelCallDuration.Bind(set), ins.ModelTimeToFirstByte.Bind(set)}
	})
	toolCalls = pairCache(contract.AttrToolName, contract.AttrServerName, func(ins *gym.Instruments, set attribute.Set) lens.BoundHistogram[float64] {
		return ins.ToolCallDuration.Bind(set)
	})
	agents = oneCache(contract.AttrAgentName, func(ins *gym.Instruments, set attribute.Set) agentSeries {
		return agentSeries{ins.AgentTurnCount.Bind(set), ins.AgentTurnDuration.Bind(set)}
	})
	sites = oneCache(contract.AttrConcurrencySite, func(ins *gym.Instruments, set attribute.Set) siteSeries {
		return siteSeries{ins.QueueWait.Bind(set), ins.AdmissionCancelled.Bind(set)}
	})

	timeoutInternal = counterOf(timeouts, attribute.Bool(contract.AttrHTTPInternal, true))
	timeoutExternal = counterOf(timeouts, attribute.Bool(contract.AttrHTTPInternal, false))

	retryDisconnected = counterOf(retries, attribute.String(contract.AttrHTTPRetryReason, contract.RetryServerDisconnected))
	retryOSError      = counterOf(retries, attribute.String(contract.AttrHTTPRetryReason, contract.RetryClientOSError))
	retryTimeout      = counterOf(retries, attribute.String(contract.AttrHTTPRetryReason, contract.RetryTimeout))
	retryOther        = counterOf(retries, attribute.String(contract.AttrHTTPRetryReason, contract.RetryOther))
)

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
	s := modelCalls.get(pair{dialect, serverName}).in(ins)
	s.duration.Record(ms(total))
	if firstByte >= 0 {
		s.firstByte.Record(ms(firstByte))
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
		timeoutInternal.in(ins).Add(1)
	} else {
		timeoutExternal.in(ins).Add(1)
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
	b := retryOther
	switch reason {
	case contract.RetryServerDisconnected:
		b = retryDisconnected
	case contract.RetryClientOSError:
		b = retryOSError
	case contract.RetryTimeout:
		b = retryTimeout
	}
	b.in(ins).Add(1)
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
	agents.get(agentName).in(ins).turns.Record(float64(turns))
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
	agents.get(agentName).in(ins).turn.Record(ms(d))
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
	toolCalls.get(pair{toolName, serverName}).in(ins).Record(ms(d))
}
