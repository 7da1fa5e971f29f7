package orchestrator

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestStdoutWriterPicksTheReadyLine(t *testing.T) {
	var log bytes.Buffer
	ready := make(chan Ready, 1)
	w := &stdoutWriter{log: &log, ready: ready}
	// The ready line arrives in pieces, between ordinary output; a line
	// that only looks like one and a second ready line are plain output.
	for _, chunk := range []string{
		"warming up\nGYM_READY not json\nGYM_RE",
		`ADY {"addr":"127.0.0.1:4000","metrics_addr":"127.0.0.1:4001",`,
		`"pid":42}` + "\nserving\n",
		`GYM_READY {"addr":"127.0.0.1:5000"}` + "\nunfinished",
	} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	select {
	case got := <-ready:
		if want := (Ready{Addr: "127.0.0.1:4000", MetricsAddr: "127.0.0.1:4001", PID: 42}); got != want {
			t.Errorf("ready = %+v, want %+v", got, want)
		}
	default:
		t.Fatal("no ready line picked up")
	}
	want := "warming up\nGYM_READY not json\nserving\n" + `GYM_READY {"addr":"127.0.0.1:5000"}` + "\n"
	if log.String() != want {
		t.Errorf("log = %q, want %q", log.String(), want)
	}
	// The unfinished line is held back until its newline comes.
	_, _ = w.Write([]byte(" now\n"))
	if !strings.HasSuffix(log.String(), "\nunfinished now\n") {
		t.Errorf("log = %q, want the completed line at the end", log.String())
	}
}

func TestStdoutWriterPassesEndlessLinesOn(t *testing.T) {
	var log bytes.Buffer
	w := &stdoutWriter{log: &log, ready: make(chan Ready, 1)}
	long := bytes.Repeat([]byte("x"), 100<<10)
	_, _ = w.Write(long)
	if log.Len() != len(long) {
		t.Errorf("logged %d bytes of a %d-byte line without newline, want all", log.Len(), len(long))
	}
}

func TestTailBufferKeepsTheLastLines(t *testing.T) {
	tb := newTailBuffer(3)
	if got := tb.Lines(); len(got) != 0 {
		t.Errorf("empty buffer: %q", got)
	}
	_, _ = tb.Write([]byte("one\ntwo\nthr"))
	_, _ = tb.Write([]byte("ee\nfour\nfive\nsi"))
	want := []string{"three", "four", "five", "si"}
	if got := tb.Lines(); !slices.Equal(got, want) {
		t.Errorf("Lines() = %q, want %q", got, want)
	}
	_, _ = tb.Write([]byte("x\n"))
	want = []string{"four", "five", "six"}
	if got := tb.Lines(); !slices.Equal(got, want) {
		t.Errorf("Lines() = %q, want %q", got, want)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":0", "localhost:0"} {
		if err := checkAddr(addr); err != nil {
			t.Errorf("checkAddr(%q) = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1", ":8080", "[::1"} {
		if err := checkAddr(addr); err == nil {
			t.Errorf("checkAddr(%q) accepted", addr)
		}
	}
}
