package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/rollout"
)

// NeMo Gym wire-protocol helpers for the fault tests: the /verify body
// they send, and the rollout lines `gymlens run` writes.

// verifyBodyTemplate is a NeMo Gym verify request for the arithmetic task
// "What is 1 + 1?" (expected answer 2), with the model's episode answering
// it correctly; %s is the JSON-encoded task_id.
const verifyBodyTemplate = `{"responses_create_params":{"input":[{"role":"user","content":"What is 1 + 1?"}]},` +
	`"task_id":%s,"expected_answer":"2",` +
	`"response":{"id":"resp_1","object":"response","created_at":1767225600,"model":"m",` +
	`"output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",` +
	`"content":[{"type":"output_text","text":"The answer is 2.","annotations":[]}]}],` +
	`"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}`

// verifyBody is the body of a POST /verify for the task with task_id id,
// answered correctly ("The answer is 2." for an expected 2).
func verifyBody(id string) string {
	q, _ := json.Marshal(id) // a string always encodes
	return fmt.Sprintf(verifyBodyTemplate, q)
}

// checkVerifyBody fails the test unless verifyBody(id) is a verify request
// the protocol accepts, carrying id as its task_id: a test that expects
// the server to refuse nothing depends on it.
func checkVerifyBody(t *testing.T, id string) {
	t.Helper()
	var req protocol.VerifyRequest
	if err := json.Unmarshal([]byte(verifyBody(id)), &req); err != nil {
		t.Fatalf("verifyBody(%q) does not decode: %v", id, err)
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("verifyBody(%q) is not a valid verify request: %v", id, err)
	}
	var got string
	if found, err := req.Fields.Decode("task_id", &got); !found || err != nil || got != id {
		t.Fatalf("verifyBody(%q) carries task_id %q (found %v, %v)", id, got, found, err)
	}
	if text := req.Response.OutputText(); text != "The answer is 2." {
		t.Fatalf("verifyBody(%q) answers %q", id, text)
	}
}

// rolloutLine is what the fault tests read of a line of rollouts.jsonl or
// of its failures file.
type rolloutLine struct {
	TaskID string `json:"task_id"`
	// FailureClass and FailureError are set on a failure line only.
	FailureClass string `json:"_ng_failure_class"`
	FailureError string `json:"_ng_failure_message"`
	// Meta is the collector's record of the rollout.
	Meta *rollout.Bookkeeping `json:"_gymlens"`
}

// attemptedAt is when the rollout's last /run call was sent.
func (l rolloutLine) attemptedAt() time.Time {
	if l.Meta == nil {
		return time.Time{}
	}
	return l.Meta.AttemptedAt
}

// readRolloutFile decodes every line of a rollouts file (path), failing
// the test on a line that does not decode. A file that does not exist
// has no line.
func readRolloutFile(t *testing.T, path string) []rolloutLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []rolloutLine
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var r rolloutLine
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v: %q", path, err, l)
		}
		if r.Meta == nil {
			t.Fatalf("%s: line without %s: %q", path, rollout.KeyBookkeeping, l)
		}
		out = append(out, r)
	}
	return out
}

// countLines counts the complete lines of path (0 when it does not exist
// yet).
func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}
