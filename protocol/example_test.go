package protocol_test

import (
	"encoding/json"
	"fmt"

	"github.com/gymlens/gymlens/protocol"
)

// A dataset row decodes into a RunRequest; its task fields are in Fields.
func ExampleRunRequest() {
	line := `{"responses_create_params":{"input":[{"role":"user","content":"Capital of France? Answer in \\boxed{}."}]},` +
		`"expected_answer":"Paris","options":[{"A":"Paris"},{"B":"Lyon"}],"x":null,` +
		`"agent_ref":{"type":"responses_api_agents","name":"string_match_simple_agent"}}`
	var row protocol.RunRequest
	if err := json.Unmarshal([]byte(line), &row); err != nil {
		panic(err)
	}
	if err := row.Validate(); err != nil {
		panic(err)
	}
	var answer string
	found, err := row.Fields.Decode("expected_answer", &answer)
	fmt.Println(answer, found, err)
	options, _ := row.Fields.Get("options")
	fmt.Println(string(options))
	fmt.Println(row.Fields.Has("x"), row.AgentRef.Name)
	fmt.Println(row.ResponsesCreateParams.Input.LastUserText())
	// Output:
	// Paris true <nil>
	// [{"A":"Paris"},{"B":"Lyon"}]
	// true string_match_simple_agent
	// Capital of France? Answer in \boxed{}.
}

// A verifier echoes the request with its reward and its own members.
func ExampleNewVerifyResponse() {
	body := `{"responses_create_params":{"input":"Capital of France?"},"expected_answer":"Paris",` +
		`"response":{"id":"resp_1","object":"response","created_at":1767225600,"model":"m",` +
		`"output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",` +
		`"content":[{"type":"output_text","text":"Paris","annotations":[]}]}],` +
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}}`
	var req protocol.VerifyRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		panic(err)
	}
	if err := req.Validate(); err != nil {
		panic(err)
	}
	var expected string
	_, _ = req.Fields.Decode("expected_answer", &expected)
	got := req.Response.OutputText()
	reward := 0.0
	if got == expected {
		reward = 1
	}
	resp := protocol.NewVerifyResponse(req, reward)
	_ = resp.Fields.Set("extracted_answer", got)
	out, _ := json.Marshal(resp)
	fmt.Println(string(out))
	// Output:
	// {"responses_create_params":{"input":"Capital of France?"},"response":{"id":"resp_1","object":"response","created_at":1767225600,"model":"m","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Paris","annotations":[]}]}],"parallel_tool_calls":true,"tool_choice":"auto","tools":[]},"reward":1,"mask_sample":false,"failure_kind":null,"failure_reason":null,"expected_answer":"Paris","extracted_answer":"Paris"}
}

// A row upstream refuses gives the FastAPI 422 body, located under "body".
func ExampleValidationError() {
	line := `{"responses_create_params":{"input":"hi","frequency_penalty":0.5,"parallel_tool_calls":null}}`
	var row protocol.RunRequest
	if err := json.Unmarshal([]byte(line), &row); err != nil {
		panic(err)
	}
	err := row.Validate()
	fmt.Println(err)
	body, _ := json.Marshal(protocol.DecodeError(err, "body"))
	fmt.Println(string(body))
	// Output:
	// 2 validation errors: responses_create_params.frequency_penalty: Extra inputs are not permitted; responses_create_params.parallel_tool_calls: Input should be a valid boolean
	// {"detail":[{"type":"extra_forbidden","loc":["body","responses_create_params","frequency_penalty"],"msg":"Extra inputs are not permitted","input":0.5},{"type":"bool_type","loc":["body","responses_create_params","parallel_tool_calls"],"msg":"Input should be a valid boolean","input":null}]}
}

// A body that does not even decode gives a 422 body too.
func ExampleDecodeError() {
	var row protocol.RunRequest
	err := json.Unmarshal([]byte(`{"responses_create_params":{"input":"hi","metadata":{"seed":3}}}`), &row)
	body, _ := json.Marshal(protocol.DecodeError(err, "body"))
	fmt.Println(string(body))
	// Output:
	// {"detail":[{"type":"string_type","loc":["body","responses_create_params","metadata","seed"],"msg":"Input should be a valid string","input":"number"}]}
}
