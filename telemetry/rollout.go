package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/baggage"
)

// WithRolloutID returns ctx carrying the rollout id as W3C baggage, so the
// servers a rollout calls can put nemo.gym.rollout.id on their own spans.
// Call it only when a span group that reads it downstream is on (the agent
// checks model_call and verify): it allocates, and the baggage is encoded
// into every call and parsed by every callee.
func WithRolloutID(ctx context.Context, id string) context.Context {
	m, err := baggage.NewMemberRaw(AttrRolloutID, id)
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
	return baggage.FromContext(ctx).Member(AttrRolloutID).Value()
}
