package report

import (
	"testing"

	"github.com/gymlens/gymlens/lens/instruments/gym"
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
	} {
		if c[0] != c[1] {
			t.Errorf("report uses %q, the writer %q", c[0], c[1])
		}
	}
}
