// Package protocol is NeMo Gym's wire protocol in Go: the bodies its
// resources, agent and model servers exchange, with the rules upstream's
// pydantic models apply to them.
//
// The types follow three rules a Go server needs to join a Python fleet:
//
//   - Nothing is lost. A dataset row carries task fields no type declares
//     (expected_answer, options, ...); they travel in Fields and come back
//     out byte for byte, as upstream's agent and verifiers pass them on.
//     Output items and content parts keep undeclared members the same way.
//     Member names match exactly, as in upstream (not in encoding/json's
//     case-insensitive way), and a declared member that arrived as null
//     goes back out as null.
//   - Required members always encode. A Response always carries id,
//     object, created_at, model, output, parallel_tool_calls, tool_choice
//     and tools; an output_text part always carries annotations; a usage
//     object always carries both detail objects.
//   - What upstream refuses is refused. ResponseCreateParams remembers
//     members upstream forbids; Validate methods report them, and every
//     other schema violation, as the FastAPI 422 body upstream answers
//     with (ValidationError), each with its location.
//
// Decoding never fails on a schema violation (only on malformed JSON or a
// value of the wrong JSON kind); call Validate to apply the schema.
//
// The schema is nemo-gym 0.7.0's (openai 2.44, pydantic 2.14): the 30
// request parameters, the item unions with their discriminators (an
// untyped input item no message form fits falls back, as upstream's does,
// to its permissive model; item_reference is refused), the request's tool
// and tool-choice TypedDicts (which forbid members they do not declare),
// BaseVerifyResponse's mask_sample, failure_kind and failure_reason, and
// the chat completions body (ValidateChatParams). Scalars are read as
// pydantic's lax mode reads a JSON body ("0.5" is a number, 1 a boolean).
// Where pydantic reports every member of a union that is not tagged, a
// Validate error names the member the value was meant for, or, when its
// type (or a chat message's role) fits no member or several, the union
// itself. TestUpstreamDifferential holds these rules against upstream's
// own models.
package protocol
