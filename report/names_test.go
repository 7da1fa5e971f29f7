package report

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/gymlens/gymlens/lens/instruments/gym"
	"github.com/gymlens/gymlens/rollout"
	"github.com/gymlens/gymlens/server"
)

// The report spells the metric contract's names itself; keep them equal to
// the writers'.
func TestNamesMatchTheWriters(t *testing.T) {
	for _, c := range [][2]string{
		{MetricRolloutDuration, gym.RolloutDurationName},
		{MetricVerifyDuration, gym.VerifyDurationName},
		{MetricVerifyRate, gym.VerifySuccessRateName},
		{MetricVerifyCalls, gym.VerifyCallsName},
		{MetricRolloutCalls, gym.RolloutCallsName},
		{MetricServersActive, gym.ServersActiveName},
		{MetricHTTPServer, server.RequestDurationName},
		{AttrVerifyOutcome, gym.VerifyOutcomeKey},
		{AttrRolloutOutcome, gym.RolloutOutcomeKey},
		{OutcomeSuccess, gym.OutcomeSuccess},
		{OutcomeFailure, gym.OutcomeFailure},
		{FailuresFile, filepath.Base(rollout.FailuresPath(RolloutsFile))},
		{KeyBookkeeping, rollout.KeyBookkeeping},
	} {
		if c[0] != c[1] {
			t.Errorf("report uses %q, the writer %q", c[0], c[1])
		}
	}
}

// The report reads the collector's members under its own names; a line
// the collector writes must read back.
func TestRolloutLineMatchesTheCollector(t *testing.T) {
	line, err := json.Marshal(map[string]any{
		rollout.KeyBookkeeping: rollout.Bookkeeping{TraceID: "t1", RolloutID: "4-2-a1", DurationMS: 1.5,
			AttemptedAt: time.Unix(1, 0).UTC(), Attempts: 2},
		"_ng_task_index": 4, "_ng_rollout_index": 2,
		"_ng_failure_class": rollout.FailureRolloutError, rollout.KeyFailureError: "boom",
	})
	if err != nil {
		t.Fatal(err)
	}
	var r rolloutJSON
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatal(err)
	}
	ro := r.rollout(FailuresFile, 1)
	if ro.TraceID != "t1" || ro.RolloutID != "4-2-a1" || ro.DurationMS != 1.5 || ro.Error != "boom" ||
		ro.FailureClass != rollout.FailureRolloutError || ro.TaskID != "4" || ro.RolloutIndex != 2 {
		t.Errorf("read back %+v", ro)
	}
}
