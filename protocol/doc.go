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
package protocol
