// Command teldiff compares two OTLP recordings (written by otlpsink
// -record): one of gymlens, one of upstream NeMo Gym, made under the same
// settings and the same load. It reduces each to the shape of what was
// exported (resource attributes, instrumentation scopes, metric names,
// kinds, units, value types, temporality, histogram bounds, attribute keys
// and the values of few-valued keys, the Prometheus series each metric
// becomes, span names, kinds, scopes, statuses, events and attribute keys;
// with -trace-id, which spans joined the trace a traceparent named) and
// prints one Markdown table whose verdict per item is "same",
// "differs: how", "only gymlens" or "only upstream".
//
// Usage:
//
//	teldiff [-json] [-trace-id HEX] GYMLENS.jsonl UPSTREAM.jsonl
//
// With -json it prints {"gymlens": summary, "upstream": summary, "rows":
// [...]} instead, for tests. Exit status: 0 when the table was printed
// (differences are its content, not an error), 1 when a recording cannot
// be read, 2 for bad usage.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("teldiff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the summaries and rows as JSON instead of a Markdown table")
	traceID := fs.String("trace-id", "", "also say which spans joined this trace (32 hex digits, from a traceparent sent to both)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: teldiff [-json] [-trace-id HEX] GYMLENS.jsonl UPSTREAM.jsonl")
		return 2
	}
	g, err := readFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "teldiff: %v\n", err)
		return 1
	}
	u, err := readFile(fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "teldiff: %v\n", err)
		return 1
	}
	rows := Compare(g, u, strings.ToLower(*traceID))
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"gymlens": g, "upstream": u, "rows": rows}); err != nil {
			fmt.Fprintf(stderr, "teldiff: %v\n", err)
			return 1
		}
		return 0
	}
	if err := WriteMarkdown(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "teldiff: %v\n", err)
		return 1
	}
	return 0
}

func readFile(path string) (*Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the recording: %w", err)
	}
	defer f.Close()
	s, err := ReadRecording(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
