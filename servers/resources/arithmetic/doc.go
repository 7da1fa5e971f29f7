// Package arithmetic is the built-in "arithmetic" environment: a NeMo Gym
// resources server, built on the environment SDK, that scores a model's
// answer to an arithmetic question at POST /verify.
//
// A dataset row carries the exact result as the task field
// expected_answer (a string such as "42"); task_id, when present, names
// the task. The answer is the text of the response's output_text parts
// (protocol.Response.OutputText). The verifier reads the last number in
// it ("The answer is 7." reads as 7; integers, decimals and thousands
// separators are understood) and compares it exactly, as a rational
// number, with the expected answer. A match earns reward 1, anything else
// 0. The response is the row echoed with reward, expected_answer and
// extracted_answer (the number read, or null).
//
// Call flow of one request (the SDK's, see package environment):
//
//	runtime + SDK: decode + validate the row ─► 422, nothing recorded
//	               [gym.verify span, gated on the verify group]
//	verify:        last number vs expected ─► reward   (or error / panic ─► 500)
//	               metrics.RecordVerify(d, completed)   exactly once
//
// Config keys: tolerance (largest accepted difference, default 0),
// work_us (a benchmarking aid: each verification first burns a
// calibrated amount of CPU, so load tests see a handler of realistic
// weight) and panic_on_task_prefix (fault injection for tests: the
// verifier panics on rows whose task_id starts with it).
//
// "Completed" is about the verifier, not the model: a wrong answer is a
// successful verification with reward 0, while a task whose expected value
// is not a number, or a verifier that panics, is a failed one.
package arithmetic
