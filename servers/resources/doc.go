// Package resources is the built-in "arithmetic" resources server: it scores
// a model's answer to an arithmetic task at POST /verify.
//
// The verifier reads the last number in the answer text ("The answer is
// 7." reads as 7; integers, decimals and thousands separators are
// understood) and compares it exactly, as a rational number, with the
// task's expected answer. A match earns reward 1, anything else 0.
//
// Call flow of one request:
//
//	runtime: decode + validate ─► 400 on a bad body, nothing recorded
//	handler: [gym.verify span, gated on the verify group]
//	         verify ─► reward          (or error / panic ─► 500)
//	         metrics.RecordVerify(d, completed)   exactly once
//
// Config.WorkMicros (`work_us`) is a benchmarking aid: it makes verify burn
// a calibrated amount of CPU before scoring, so load tests can give the
// server a handler of realistic weight.
//
// "Completed" is about the verifier, not the model: a wrong answer is a
// successful verification with reward 0, while a task whose expected value
// is not a number, or a verifier that panics, is a failed one.
package resources
