package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchVerifyJSON is a realistic /verify body: a row with ten task
// fields and a three-message input, and an episode with one reasoning
// item, one function call, its output and the assistant's answer.
var benchVerifyJSON = `{"responses_create_params":{"input":[` +
	`{"role":"system","content":"You are a careful assistant. Think step by step, call tools when useful, and put the final answer in \\boxed{}."},` +
	`{"role":"user","content":"What is the population of the capital of France, rounded to the nearest million?"},` +
	`{"role":"assistant","content":"Let me look that up."}],` +
	`"tools":[{"type":"function","name":"lookup","description":"Look a fact up","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]},"strict":true}],` +
	`"temperature":0.6,"top_p":0.95,"max_output_tokens":4096,"parallel_tool_calls":true,"tool_choice":"auto","metadata":{"extra_body":"{\"seed\": 3}"}},` +
	`"expected_answer":"2","extraction_mode":"boxed","options":[{"A":"1"},{"B":"2"},{"C":"11"},{"D":"12"}],` +
	`"category":"geography","difficulty":2,"source":"unit-bench","task_id":"geo-0042","verified":true,` +
	`"judge":{"model":"none","threshold":0.5},"notes":null,` +
	`"_ng_task_index":42,"_ng_rollout_index":3,"agent_ref":{"type":"responses_api_agents","name":"simple_agent"},` +
	`"response":{"id":"resp_bench","object":"response","created_at":1767225600,"model":"policy",` +
	`"output":[` +
	`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"The capital of France is Paris; I should check its population."}],"content":null,"encrypted_content":null},` +
	`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"query\": \"population of Paris\"}","status":"completed"},` +
	`{"type":"function_call_output","call_id":"call_1","output":"Paris has about 2.1 million inhabitants (city proper)."},` +
	`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Paris has about 2.1 million people, so the answer is \\boxed{2}.","annotations":[]}]}],` +
	`"parallel_tool_calls":true,"tool_choice":"auto",` +
	`"tools":[{"type":"function","name":"lookup","description":"Look a fact up","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]},"strict":true}],` +
	`"status":"completed","incomplete_details":null,"temperature":0.6,"top_p":0.95,` +
	`"usage":{"input_tokens":512,"input_tokens_details":{"cached_tokens":128},"output_tokens":96,"output_tokens_details":{"reasoning_tokens":40},"total_tokens":608}}}`

// BenchmarkVerifyRoundTrip decodes, validates and re-encodes one /verify
// body, as a resources server does for every rollout.
func BenchmarkVerifyRoundTrip(b *testing.B) {
	body := []byte(benchVerifyJSON)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var req VerifyRequest
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
		if err := req.Validate(); err != nil {
			b.Fatal(err)
		}
		resp := NewVerifyResponse(req, 1)
		if err := resp.Fields.Set("extracted_answer", "2"); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(resp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyDecode decodes one /verify body.
func BenchmarkVerifyDecode(b *testing.B) {
	body := []byte(benchVerifyJSON)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var req VerifyRequest
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResponseEncode encodes a response built in Go, as a model
// server answers every turn.
func BenchmarkResponseEncode(b *testing.B) {
	r := Response{ID: "resp_bench", CreatedAt: 1767225600, Model: "policy", ParallelToolCalls: true, Status: ResponseCompleted,
		Output: []Item{
			{Type: TypeReasoning, ID: "rs_1", Summary: []Part{{Type: PartSummary, Text: "The capital of France is Paris."}}},
			FunctionCall("fc_1", "call_1", "lookup", `{"query": "population of Paris"}`),
			FunctionCallOutput("call_1", "Paris has about 2.1 million inhabitants."),
			AssistantMessage("msg_1", strings.Repeat("Paris has about 2.1 million people. ", 8)+`\boxed{2}`),
		},
		Tools: []Tool{FunctionTool("lookup", "Look a fact up", json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`))},
		Usage: NewUsage(512, 96)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
}

// benchVerifyAnswer is the resources server's answer to benchVerifyJSON:
// the request echoed, the reward and a member of the verifier's.
var benchVerifyAnswer = strings.TrimSuffix(benchVerifyJSON, "}") + `,"reward":1.0,"extracted_answer":"2"}`

// BenchmarkVerifyAnswerTyped is what the agent did with every verify
// answer before it passed them on raw: decode, validate, encode for
// /run. BenchmarkVerifyAnswerChecked is the baseline it is compared to.
func BenchmarkVerifyAnswerTyped(b *testing.B) {
	body := []byte(benchVerifyAnswer)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var resp VerifyResponse
		if err := json.Unmarshal(body, &resp); err != nil {
			b.Fatal(err)
		}
		if err := resp.Validate(); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(resp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyAnswerChecked is what the agent does with a verify
// answer now: the shallow check, the bytes passed on as they are.
func BenchmarkVerifyAnswerChecked(b *testing.B) {
	body := []byte(benchVerifyAnswer)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := CheckVerifyResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}
