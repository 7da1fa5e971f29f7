// Package dataset holds the tasks a collection run feeds to an agent: a
// built-in arithmetic dataset that needs no download, and the JSONL file
// format tasks are stored in.
//
// A task file has one protocol.Task per line:
//
//	{"id":"arith-000001","question":"What is 17 + 25?","expected":"42"}
//
// Reading is strict where a silent mistake would cost a run: every task must
// pass Task.Validate and ids must be unique, because the collector resumes
// by task id. Errors name the 1-based line so a bad file can be fixed by
// hand. Blank lines are ignored and fields the Task type does not know are
// accepted, so richer task files can be read as well.
package dataset
