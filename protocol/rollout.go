package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadRolloutID is wrapped by RolloutID's error for an explicit
// _ng_rollout_id that upstream would refuse.
var ErrBadRolloutID = fmt.Errorf("%s must be letters, digits, dots, dashes or underscores, starting with a letter or digit", KeyRolloutID)

// ValidRolloutID reports whether id has the shape upstream requires of a
// rollout id: ^[A-Za-z0-9][A-Za-z0-9._-]*$.
func ValidRolloutID(id string) bool {
	if id == "" || !alnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// ResolveRolloutID returns the id upstream gives the rollout of a row: the explicit
// _ng_rollout_id when set (a decoded row's "" included, which upstream
// refuses), else "<task index>-<rollout index>", with "-a<n>" appended
// for a retry attempt n > 0. ok is false when the row has neither an
// explicit id nor both indexes.
func (r *RunRequest) ResolveRolloutID() (id string, ok bool, err error) {
	if raw, found := r.Fields.Get(KeyRolloutID); found && r.RolloutID == "" && !isNull(raw) {
		// An explicit id that is not a string.
		return "", false, fmt.Errorf("%w; got %s", ErrBadRolloutID, raw)
	}
	switch {
	case r.RolloutID != "" || r.present&^r.nulls&rowRolloutID != 0:
		if !ValidRolloutID(r.RolloutID) {
			return "", false, fmt.Errorf("%w; got %q", ErrBadRolloutID, r.RolloutID)
		}
		id = r.RolloutID
	case r.TaskIndex != nil && r.RolloutIndex != nil:
		id = strconv.Itoa(*r.TaskIndex) + "-" + strconv.Itoa(*r.RolloutIndex)
	default:
		return "", false, nil
	}
	if r.AttemptIndex != nil && *r.AttemptIndex > 0 {
		id += "-a" + strconv.Itoa(*r.AttemptIndex)
	}
	return id, true, nil
}

// TokenCaptureSegment is the optional path segment after a rollout id on
// a model server's or agent's prefixed routes.
const TokenCaptureSegment = "/training-token-capture"

// SplitRolloutPath splits /ng-rollout/<id>/<rest> into the id and /<rest>,
// as upstream's resources servers strip it: the id must be a valid
// rollout id and a rest must follow. ok is false for any other path.
func SplitRolloutPath(path string) (id, rest string, ok bool) {
	id, rest, ok = cutRolloutPrefix(path)
	if !ok || !ValidRolloutID(id) {
		return "", "", false
	}
	return id, rest, true
}

// SplitModelRolloutPath splits a model server's prefixed path: any
// non-empty id segment, an optional /training-token-capture, then the
// rest, as upstream's model servers strip it.
func SplitModelRolloutPath(path string) (id, rest string, capture, ok bool) {
	id, rest, ok = cutRolloutPrefix(path)
	if !ok {
		return "", "", false, false
	}
	if after, found := strings.CutPrefix(rest, TokenCaptureSegment); found && strings.HasPrefix(after, "/") {
		return id, after, true, true
	}
	return id, rest, false, true
}

func cutRolloutPrefix(path string) (id, rest string, ok bool) {
	after, found := strings.CutPrefix(path, RolloutPrefix)
	if !found {
		return "", "", false
	}
	slash := strings.IndexByte(after, '/')
	if slash <= 0 {
		return "", "", false
	}
	return after[:slash], after[slash:], true
}

// RolloutPath returns /ng-rollout/<id><path>.
func RolloutPath(id, path string) string { return RolloutPrefix + id + path }

// RolloutIDOfRow is ResolveRolloutID of the row encoded in b, for a
// server that passes a row on without decoding it (the legacy_agent
// relay): it reads only the row's bookkeeping members (_ng_task_index,
// _ng_rollout_index, _ng_attempt_index, _ng_rollout_id), skipping the
// parameters and task fields. ok is false when b is not a JSON object or
// names no rollout, or names one upstream would refuse.
func RolloutIDOfRow(b []byte) (id string, ok bool) {
	if !json.Valid(b) {
		return "", false
	}
	small := []byte{'{'}
	err := scanObject(b, typeObject, func(key string, raw []byte) error {
		switch key {
		case KeyTaskIndex, KeyRolloutIndex, KeyAttemptIndex, KeyRolloutID:
			if len(small) > 1 {
				small = append(small, ',')
			}
			small = appendString(small, key)
			small = append(append(small, ':'), raw...)
		}
		return nil
	})
	if err != nil {
		return "", false
	}
	var r RunRequest
	if _, err := decodeRow(append(small, '}'), &r, 0); err != nil {
		return "", false
	}
	id, ok, err = r.ResolveRolloutID()
	return id, ok && err == nil
}
