package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/telemetry"
)

// ErrNotOrchestrator is returned by RecordActiveServers in any process that
// was not initialised as the orchestrator.
var ErrNotOrchestrator = errors.New("metrics: gym.servers.active may only be recorded by the orchestrator")

// RecordRolloutDuration records one rollout's wall-clock duration into
// gym.rollout.duration_ms. Prefer RecordRollout, which also counts the
// outcome.
func RecordRolloutDuration(d time.Duration) {
	if telemetry.Recording() {
		record(gym.KindRolloutDuration, d, true)
	}
}

// RecordRollout records one rollout's duration into gym.rollout.duration_ms
// and counts it in gym.rollout.completed_total by nemo.gym.rollout.outcome.
// Failed rollouts are recorded too.
func RecordRollout(d time.Duration, succeeded bool) {
	if telemetry.Recording() {
		record(gym.KindRollout, d, succeeded)
	}
}

// RecordVerify records one verification's duration into
// gym.verify.duration_ms and folds its outcome into gym.verify.calls and
// gym.verify.success_rate. succeeded means the verifier completed (whatever
// reward it gave); a verifier that errored or panicked did not succeed.
//
// The success rate is this process's cumulative fraction since start, not a
// windowed rate: it moves more slowly as the process ages. Read windowed or
// fleet-wide rates from gym.verify.calls.
func RecordVerify(d time.Duration, succeeded bool) {
	if telemetry.Recording() {
		record(gym.KindVerify, d, succeeded)
	}
}

// RecordActiveServers sets gym.servers.active to count. Only the
// orchestrator knows the fleet size, so any other process gets
// ErrNotOrchestrator and nothing is recorded; a negative count is refused
// with an error too. In the orchestrator with telemetry off it does nothing.
func RecordActiveServers(count int) error {
	if !telemetry.IsOrchestrator() {
		return ErrNotOrchestrator
	}
	if count < 0 {
		return fmt.Errorf("metrics: negative server count %d", count)
	}
	if ins := telemetry.Instruments(); ins != nil {
		recordMeasurement(ins, gym.Measurement{Kind: gym.KindServersActive, Value: float64(count)})
	}
	return nil
}

// ResetVerifyTallyForTesting zeroes the verify tally behind
// gym.verify.success_rate and gym.verify.calls. Tests only.
func ResetVerifyTallyForTesting() { telemetry.Instruments().ResetVerifyTally() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// record converts a duration and forwards it. Nothing here runs when
// telemetry is off: the exported recorders stop at the gate.
func record(kind gym.Kind, d time.Duration, succeeded bool) {
	if ins := telemetry.Instruments(); ins != nil {
		recordMeasurement(ins, gym.Measurement{Kind: kind, Value: ms(d), Succeeded: succeeded})
	}
}

// recordMeasurement forwards to the instruments. It never lets a failure
// reach the caller: a refused value or a panic below is logged at debug and
// dropped.
func recordMeasurement(ins *gym.Instruments, m gym.Measurement) {
	defer func() {
		if r := recover(); r != nil {
			slog.Debug("metrics: recording panicked; dropped", "panic", r)
		}
	}()
	if err := ins.Record(context.Background(), m); err != nil {
		slog.Debug("metrics: measurement dropped", "err", err, "value", m.Value)
	}
}
