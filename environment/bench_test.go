package environment_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// benchBody is a realistic verify request: the row as upstream's agent
// dumps it (every responses_create_params default filled in, the
// collector's bookkeeping, task fields) and a two-turn episode with a
// reasoning item, a tool call and its output, and a final answer of a
// few hundred characters.
var benchBody = func() []byte {
	answer := strings.Repeat("Let me work through this step by step. ", 12) + "The answer is Paris."
	a, _ := json.Marshal(answer)
	return []byte(`{"responses_create_params":{"background":null,"include":null,` +
		`"input":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France? Answer with the city name."}],` +
		`"instructions":null,"max_output_tokens":1024,"max_tool_calls":null,"metadata":null,"model":null,"parallel_tool_calls":true,` +
		`"previous_response_id":null,"prompt":null,"reasoning":null,"service_tier":null,"store":null,"temperature":0.7,"text":null,` +
		`"tool_choice":"auto","tools":[{"type":"function","name":"lookup","description":"Look a fact up.","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false},"strict":true}],` +
		`"top_logprobs":null,"top_p":null,"truncation":null,"user":null,"stream":null},` +
		`"expected_answer":"Paris","extraction_mode":"full_response","metadata":{"source":"geo","difficulty":2},` +
		`"_ng_task_index":41,"_ng_rollout_index":3,"agent_ref":{"type":"responses_api_agents","name":"exact_simple_agent"},` +
		`"response":{"id":"resp_0042","object":"response","created_at":1767225600,"model":"policy","status":"completed",` +
		`"output":[` +
		`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Need the capital."}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"q\": \"capital of France\"}","status":"completed"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"{\"result\": \"Paris\"}"},` +
		`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":` + string(a) + `,"annotations":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[{"type":"function","name":"lookup","parameters":null,"strict":true}],` +
		`"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":0},"output_tokens":96,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":216}}}`)
}()

// BenchmarkVerifyRequest measures one verification through the handler
// (decoding, validation, the task, the verify function, the echo),
// without a socket, and the protocol's share of it: decoding, validating
// and encoding the same body alone.
func BenchmarkVerifyRequest(b *testing.B) {
	b.Run("handler", func(b *testing.B) {
		var calls atomic.Int64
		env := exactEnv(&calls)
		opts := environment.ServerOptions(env.Name(), "bench")
		opts.Name, opts.Logger = env.Name(), quiet
		s := server.New(opts)
		env.Register(s)
		h := s.Handler()
		b.SetBytes(int64(len(benchBody)))
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/verify", bytes.NewReader(benchBody))
			req.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
	b.Run("decode+encode", func(b *testing.B) {
		b.SetBytes(int64(len(benchBody)))
		b.ReportAllocs()
		for b.Loop() {
			var req protocol.VerifyRequest
			if err := json.Unmarshal(benchBody, &req); err != nil {
				b.Fatal(err)
			}
			if err := req.Validate(); err != nil {
				b.Fatal(err)
			}
			resp := protocol.NewVerifyResponse(req, 1)
			_ = resp.Fields.Set("extracted_answer", "Paris")
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}
