package protocol

import (
	"strconv"
	"strings"
)

// TaskIndexOfRolloutID reads the task index back from a rollout id of the
// form ResolveRolloutID gives a row without an explicit _ng_rollout_id:
// "<task index>-<rollout index>", with "-a<n>" for a retry attempt n > 0.
// ok is false for any other id, an explicit one among them (an explicit
// id spelled the same way, "3-1", reads as task 3: the wire cannot tell
// them apart). Only the canonical spelling is read: no sign, no leading
// zero, no attempt suffix "-a0".
func TaskIndexOfRolloutID(id string) (task int, ok bool) {
	taskText, rest, found := strings.Cut(id, "-")
	if !found {
		return 0, false
	}
	rollout, attempt, hasAttempt := strings.Cut(rest, "-")
	if !canonicalIndex(taskText) || !canonicalIndex(rollout) {
		return 0, false
	}
	if hasAttempt {
		n, isAttempt := strings.CutPrefix(attempt, "a")
		if !isAttempt || !canonicalIndex(n) || n == "0" {
			return 0, false
		}
	}
	task, err := strconv.Atoi(taskText)
	if err != nil {
		return 0, false // out of int's range
	}
	return task, true
}

// canonicalIndex reports whether s is a non-negative decimal integer as
// strconv.Itoa writes one.
func canonicalIndex(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
