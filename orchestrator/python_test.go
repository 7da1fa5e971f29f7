package orchestrator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/orchestrator"
)

// upstreamServerDir is where upstream's installed package keeps the
// server of type typ and implementation impl, as its launcher resolves it.
func upstreamServerDir(t *testing.T, python, typ, impl string) string {
	t.Helper()
	out := upstream.Run(t, time.Minute, "import nemo_gym, os; print(os.path.dirname(os.path.dirname(nemo_gym.__file__)))", nil)
	dir := filepath.Join(strings.TrimSpace(string(out)), typ, impl)
	if _, err := os.Stat(filepath.Join(dir, "app.py")); err != nil {
		t.Fatalf("%s/%s of %s: %v", typ, impl, python, err)
	}
	return dir
}

// answerVerify is a model answer whose text is text, as an upstream
// /verify body carries it.
func answerVerify(text string) map[string]any {
	return map[string]any{
		"responses_create_params": map[string]any{"input": "question"},
		"response": map[string]any{
			"id": "resp_1", "created_at": 1, "model": "m", "object": "response",
			"output": []any{map[string]any{
				"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}},
			}},
			"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		},
	}
}

// Upstream's own Python resources servers (string_match and mcqa, their
// blocks as upstream's configs write them, entrypoint and all) start under
// gymlens's launch contract: the dict every child gets carries the keys
// upstream's parser writes, which they read at start-up (dry_run).
func TestUpstreamPythonServersInAGymlensFleet(t *testing.T) {
	python := upstream.Python(t)
	testenv.ClearTelemetry(t)
	sm := upstreamServerDir(t, python, "resources_servers", "string_match")
	mcqa := upstreamServerDir(t, python, "resources_servers", "mcqa")
	dir := t.TempDir()
	doc := fmt.Sprintf(`string_match:
  resources_servers:
    string_match:
      entrypoint: app.py
      domain: knowledge
      verified: false
      description: string matching
      value: a verifier
      command: [%q, %q]
mcqa:
  resources_servers:
    mcqa:
      entrypoint: app.py
      grading_mode: null
      domain: knowledge
      verified: false
      command: [%q, %q]
`, python, filepath.Join(sm, "app.py"), python, filepath.Join(mcqa, "app.py"))
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := orchestrator.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, cfg, orchestrator.Options{HealthTimeout: 90 * time.Second, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"}})

	for _, tc := range []struct {
		server string
		body   map[string]any
		reward float64
	}{
		{"string_match", with(answerVerify("Final answer: Lyon"), "expected_answer", "lyon"), 1},
		{"string_match", with(answerVerify("Final answer: Paris"), "expected_answer", "lyon"), 0},
		{"mcqa", with(with(answerVerify(`The answer is \boxed{B}`), "options", []any{map[string]any{"A": "Paris"}, map[string]any{"B": "Lyon"}}), "expected_answer", "B"), 1},
	} {
		base := f.URL(tc.server)
		if code := get(t, base+"/"); code != http.StatusOK {
			t.Errorf("%s: GET / = %d", tc.server, code)
		}
		raw, _ := json.Marshal(tc.body)
		res, err := httpClient.Post(base+"/verify", "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var v struct {
			Reward *float64 `json:"reward"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(out, &v) != nil || v.Reward == nil || *v.Reward != tc.reward {
			t.Errorf("%s /verify = %d %s, want reward %v", tc.server, res.StatusCode, out, tc.reward)
		}
	}
}

// with returns m with key set to v.
func with(m map[string]any, key string, v any) map[string]any {
	m[key] = v
	return m
}
