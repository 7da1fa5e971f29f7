package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/agent"
	"github.com/gymlens/gymlens/telemetry"
)

// runBodyLimit is the agent's body limit in the fuzz target: small, so
// the 413 path is reachable with small inputs.
const runBodyLimit = 4 << 10

// maxRunBody bounds what the fuzzer sends.
const maxRunBody = 64 << 10

// dropSpans is a span exporter that drops everything, so the fuzzed
// fleet records spans without the test keeping them.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

// toolThenAnswer is a stateless policy: a get_weather call while the
// input holds no function_call_output, then an answer.
func toolThenAnswer(_ int, body []byte) (int, string) {
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	if bytes.Contains(req.Input, []byte(`"function_call_output"`)) {
		return http.StatusOK, response("r2", message("m", "It is sunny."))
	}
	return http.StatusOK, response("r1", functionCall("c1", "get_weather", `{"city":"SF"}`))
}

// expectRun is the fuzz test's oracle for /run: the statuses the body
// may get, and the row it decodes to. Past the limit the runtime answers
// 413 (or 422, for JSON that breaks before it); a body that is not one
// row upstream accepts is a 422 (an explicit _ng_rollout_id that is not
// a string or null included); anything else is a rollout the fakes
// complete, 200: the fixture's fleet has no observability_enabled, so a
// malformed explicit id is no id, as upstream reads none.
func expectRun(body []byte, limit int) (row protocol.RunRequest, want []int) {
	if len(body) > limit {
		return row, []int{http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&row); err != nil {
		return row, []int{http.StatusUnprocessableEntity}
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return row, []int{http.StatusUnprocessableEntity}
	}
	if row.Validate() != nil {
		return row, []int{http.StatusUnprocessableEntity}
	}
	if raw, ok := row.Fields.Get(protocol.KeyRolloutID); ok && string(raw) != "null" {
		return row, []int{http.StatusUnprocessableEntity} // decoded rows keep only a string id out of Fields
	}
	return row, []int{http.StatusOK}
}

func FuzzRunBody(f *testing.F) {
	for _, seed := range []string{
		weatherRow,
		minimalRow,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"r-1"}`,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":"  "}`,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":null,"_ng_task_index":0,"_ng_rollout_index":2,"_ng_attempt_index":1}`,
		`{"responses_create_params":{"input":"hi"},"_ng_rollout_id":7}`,
		`{"responses_create_params":{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"tool_choice":"required","parallel_tool_calls":false}}`,
		`{"responses_create_params":{"input":[{"type":"function_call_output","call_id":"c0","output":"x"}]}}`,
		`{"responses_create_params":{"input":"hi","metadata":{"a":"b"},"max_output_tokens":16,"stream":false}}`,
		`{"responses_create_params":{"input":"hi","metadata":{"a":1}}}`,
		`{"responses_create_params":{"input":"hi","stream":true}}`,
		`{"responses_create_params":{"input":"hi","tool_choice":null}}`,
		`{"responses_create_params":{"input":"hi","unknown":1}}`,
		`{"responses_create_params":{"input":null}}`,
		`{"responses_create_params":null}`,
		`{"responses_create_params":{"input":"hi"},"response":{"id":1},"reward":"high","verification_skipped":false}`,
		`{"responses_create_params":{"input":"hi"},"agent_ref":"simple_agent"}`,
		`{"responses_create_params":{"input":"hi"},"a":1,"a":2}`,
		`{"responses_create_params":{"input":"` + strings.Repeat("x", runBodyLimit) + `"}}`,
		`{"responses_create_params":{"input":"\u0000\ud800 \u2028"},"task":"\u00e9"}`,
		"{\"responses_create_params\":{\"input\":\"\xff\"},\"k\":\"\xc0\"}",
		`{"responses_create_params":{"input":"hi"}} []`,
		`{"responses_create_params":{"input":"hi"}`,
		``, `null`, `{}`, `[]`, `true`, `"row"`,
	} {
		f.Add([]byte(seed))
	}

	servertest.EnableTelemetry(f, telemetry.InitOptions{ServerName: agent.ServerName,
		ServerType: contract.ServerTypeAgent, SpanExporter: dropSpans{}, MetricReader: sdkmetric.NewManualReader()})
	fx := startFixture(f, toolThenAnswer, resourcesOptions{}, agent.Config{}, runBodyLimit)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	f.Cleanup(func() {
		for _, u := range []string{fx.agentURL, fx.modelURL, fx.resourcesURL} {
			servertest.CheckHealth(f, client, u)
		}
		client.CloseIdleConnections()
	})

	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxRunBody {
			t.Skip("body too large")
		}
		fx.log.reset()
		row, want := expectRun(body, runBodyLimit)
		status, raw := servertest.Post(t, client, fx.agentURL+"/run", body)
		ok := false
		for _, w := range want {
			ok = ok || status == w
		}
		if !ok {
			t.Fatalf("%.300q: status %d (%.300s), want one of %v", body, status, raw, want)
		}
		if status != http.StatusOK {
			servertest.CheckErrorBody(t, status, raw)
			if len(fx.log.all()) != 0 {
				t.Errorf("%.300q: a refused body made calls %q", body, fx.log.sequence())
			}
			servertest.CheckHealth(t, client, fx.agentURL)
			return
		}

		// A rollout: seed first, verify last, and the answer is the
		// verifier's echo of the row with the episode.
		seq := fx.log.sequence()
		if len(seq) < 3 || seq[0] != "resources /seed_session" || seq[len(seq)-1] != "resources /verify" {
			t.Fatalf("%.300q: calls %q", body, seq)
		}
		var answer map[string]json.RawMessage
		if err := json.Unmarshal(raw, &answer); err != nil {
			t.Fatalf("%.300q: 200 with a body that is not an object: %v: %.300s", body, err, raw)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("%.300q: a row the runtime took is not an object: %v", body, err)
		}
		// Every member of the row but _ng_rollout_id, which upstream's
		// agent never forwards nor answers.
		for key := range members {
			if _, ok := answer[key]; !ok && key != protocol.KeyRolloutID {
				t.Errorf("%.300q: answer lacks the row's member %q: %.300s", body, key, raw)
			}
		}
		if _, ok := answer[protocol.KeyRolloutID]; ok {
			t.Errorf("%.300q: answer has %s: %.300s", body, protocol.KeyRolloutID, raw)
		}
		for _, path := range []string{"/seed_session", "/verify"} {
			var sent map[string]json.RawMessage
			if err := json.Unmarshal(fx.log.to("resources", path)[0].Body, &sent); err != nil {
				t.Fatalf("%.300q: %s body: %v", body, path, err)
			}
			if _, ok := sent[protocol.KeyRolloutID]; ok {
				t.Errorf("%.300q: %s was sent %s", body, path, protocol.KeyRolloutID)
			}
		}
		for _, key := range row.Fields {
			if _, ok := answer[key.Key]; !ok {
				t.Errorf("%.300q: answer lacks task field %q", body, key.Key)
			}
		}
		var resp protocol.Response
		if err := json.Unmarshal(answer["response"], &resp); err != nil || resp.Validate() != nil || len(resp.Output) == 0 {
			t.Errorf("%.300q: answer's response %.300s is not a valid episode: %v", body, answer["response"], err)
		}
		if string(answer["reward"]) != "1.0" || string(answer["checked_by"]) != `"fake"` { // as the verifier wrote them
			t.Errorf("%.300q: reward %s checked_by %s, want the verifier's", body, answer["reward"], answer["checked_by"])
		}
	})
}
