package protocol_test

import (
	"testing"

	"github.com/gymlens/gymlens/protocol"
)

// TestTaskIndexOfRolloutIDInvertsResolve reads back the task index of
// every id ResolveRolloutID forms from indexes, and refuses the ids it
// does not form.
func TestTaskIndexOfRolloutIDInvertsResolve(t *testing.T) {
	for _, c := range []struct{ task, rollout, attempt int }{
		{0, 0, 0}, {1, 0, 0}, {17, 3, 0}, {3, 1, 2}, {12345, 99, 10},
	} {
		task, rollout, attempt := c.task, c.rollout, c.attempt
		row := protocol.RunRequest{TaskIndex: &task, RolloutIndex: &rollout, AttemptIndex: &attempt}
		id, ok, err := row.ResolveRolloutID()
		if err != nil || !ok {
			t.Fatalf("ResolveRolloutID(%+v) = %q, %v, %v", c, id, ok, err)
		}
		got, ok := protocol.TaskIndexOfRolloutID(id)
		if !ok || got != c.task {
			t.Errorf("TaskIndexOfRolloutID(%q) = %d, %v; want %d, true", id, got, ok, c.task)
		}
	}
	for _, id := range []string{
		"", "3", "3-", "-3-1", "a-1", "3-b", "03-1", "3-01", "+3-1", "3-1-a0", "3-1-a", "3-1-b2",
		"3-1-a2-x", "3-1-a02", "run-7", "99999999999999999999999-1",
	} {
		if task, ok := protocol.TaskIndexOfRolloutID(id); ok {
			t.Errorf("TaskIndexOfRolloutID(%q) = %d, true; want false", id, task)
		}
	}
}
