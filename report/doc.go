// Package report reads a run directory back: the telemetry files every
// process wrote and the collected rollouts.
//
// It works only from what was exported (spans, metric records) and written
// (rollouts.jsonl); it never re-times anything.
package report
