package telemetry

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// WithRolloutID returns ctx carrying the rollout id as W3C baggage, so the
// servers a rollout calls can put nemo.gym.rollout.id on their own spans
// (gym.model.responses, gym.verify). When neither of the groups of those
// spans (model_call, verify) is on it returns ctx unchanged: span groups are
// set for the whole fleet, so nobody downstream would read the id, and the
// baggage would be built here, encoded into every call and parsed by every
// callee for nothing. The same holds for a trace the sampler dropped
// (lens.SampledOut).
func WithRolloutID(ctx context.Context, id string) context.Context {
	if !lens.Enabled(GroupModelCall) && !lens.Enabled(GroupVerify) || lens.SampledOut(ctx) {
		return ctx
	}
	m, err := baggage.NewMemberRaw(contract.AttrRolloutID, id)
	if err != nil {
		return ctx
	}
	b, err := baggage.FromContext(ctx).SetMember(m)
	if err != nil {
		return ctx
	}
	return baggage.ContextWithBaggage(ctx, b)
}

// RolloutIDFrom returns the rollout id carried by ctx's baggage, or "".
func RolloutIDFrom(ctx context.Context) string {
	return baggage.FromContext(ctx).Member(contract.AttrRolloutID).Value()
}

// RolloutIdentity are the keys that name a rollout on its spans next to
// its nemo.gym.rollout.id: its task index (nemo.gym.task.id, in decimal,
// as the report names a task), repeat and attempt (0 when nil), so that a
// rollout on the live view and its trace are found by the same words.
// The collector's /run CLIENT span and the agent's gym.rollout span carry
// them. Nil when the row has no task or repeat index.
func RolloutIdentity(task, repeat, attempt *int) []attribute.KeyValue {
	if task == nil || repeat == nil {
		return nil
	}
	a := 0
	if attempt != nil {
		a = *attempt
	}
	return []attribute.KeyValue{
		attribute.String(contract.AttrTaskID, strconv.Itoa(*task)),
		attribute.Int(contract.AttrRolloutRepeat, *repeat),
		attribute.Int(contract.AttrRolloutAttempt, a),
	}
}
