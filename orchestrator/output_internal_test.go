package orchestrator

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// A child's output reaches its log with every URL scrubbed of userinfo and
// query, however the writes split the lines, and nothing else changed.
func TestDrainScrubsURLsInChildOutput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		drain(r, &got)
	}()
	long := strings.Repeat("x", maxLogLine+100)
	parts := []string{
		"starting\nexporting to https://alice:s3cret@collector.example:4318/v1/traces?api_key=k",
		"ey123 now\n",
		long + "\n",
		"no newline at the end: http://bob:hunter2@model/v1",
	}
	for _, p := range parts {
		if _, err := w.WriteString(p); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	<-done
	r.Close()
	out := got.String()
	for _, secret := range []string{"s3cret", "alice", "key123", "hunter2", "bob"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q reached the log: %.200q", secret, out)
		}
	}
	for _, kept := range []string{"starting\n", "collector.example:4318/v1/traces", " now\n", long + "\n", "no newline at the end: http://", "@model/v1"} {
		if !strings.Contains(out, kept) {
			t.Errorf("log lost %.60q: %.200q", kept, out)
		}
	}
}
