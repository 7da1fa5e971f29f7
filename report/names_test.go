package report

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/rollout"
)

// The report names the run directory's files after the contract, and the
// collector derives its failures file from its output; the two must agree.
// The member holding the collector's own record is the rollout package's.
func TestRunFilesMatchTheCollector(t *testing.T) {
	if got := filepath.Base(rollout.FailuresPath(contract.RunRolloutsFile)); got != contract.RunFailuresFile {
		t.Errorf("the collector writes the failures of %s to %s; the report reads %s",
			contract.RunRolloutsFile, got, contract.RunFailuresFile)
	}
	if KeyBookkeeping != rollout.KeyBookkeeping {
		t.Errorf("report reads member %q, the collector writes %q", KeyBookkeeping, rollout.KeyBookkeeping)
	}
}

// The report reads the collector's members under its own names; a line
// the collector writes must read back.
func TestRolloutLineMatchesTheCollector(t *testing.T) {
	line, err := json.Marshal(map[string]any{
		rollout.KeyBookkeeping: rollout.Bookkeeping{TraceID: "t1", RolloutID: "4-2-a1", DurationMS: 1.5,
			AttemptedAt: time.Unix(1, 0).UTC(), Attempts: 2},
		"_ng_task_index": 4, "_ng_rollout_index": 2,
		"_ng_failure_class": rollout.FailureAgentRunError, rollout.KeyFailureMessage: "boom",
	})
	if err != nil {
		t.Fatal(err)
	}
	var r rolloutJSON
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatal(err)
	}
	ro := r.rollout(contract.RunFailuresFile, 1)
	if ro.TraceID != "t1" || ro.RolloutID != "4-2-a1" || ro.DurationMS != 1.5 || ro.Error != "boom" ||
		ro.FailureClass != rollout.FailureAgentRunError || ro.TaskID != "4" || ro.RolloutIndex != 2 {
		t.Errorf("read back %+v", ro)
	}
}
