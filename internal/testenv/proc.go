package testenv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that a process's output goroutines and the test
// reading it may use at the same time.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Proc is a process a test started with Start.
type Proc struct {
	// Cmd is the started command.
	Cmd *exec.Cmd
	// Stdout and Stderr hold the process's output: each is the Buffer
	// Start made for a stream the caller left nil, or the caller's own
	// *Buffer (one Buffer may take both streams). A stream the caller sent
	// to any other writer leaves its field nil.
	Stdout, Stderr *Buffer

	bound time.Duration
	done  chan struct{}
	err   error // cmd.Wait's, once done is closed
}

// Start starts cmd and watches for its exit. Every wait on the process
// (Wait, WaitHTTP, the cleanup's reaping) is bounded by bound. When the
// test ends a process still running is killed by its PID (its whole
// process group when cmd.SysProcAttr sets Setpgid) and reaped; one not
// reaped within bound is reported as an error of the test.
func Start(t testing.TB, cmd *exec.Cmd, bound time.Duration) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, bound: bound, done: make(chan struct{})}
	p.Stdout = capture(&cmd.Stdout)
	p.Stderr = capture(&cmd.Stderr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		kill(cmd)
		select {
		case <-p.done:
		case <-time.After(bound):
			t.Errorf("pid %d not reaped %s after kill", cmd.Process.Pid, bound)
		}
	})
	return p
}

// capture returns the Buffer *w writes to, setting *w to a new one if it
// is nil, or nil if *w is some other writer.
func capture(w *io.Writer) *Buffer {
	if *w == nil {
		b := &Buffer{}
		*w = b
		return b
	}
	b, _ := (*w).(*Buffer)
	return b
}

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is cmd.Wait's result, once Done is closed; nil before.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// ExitCode is the process's exit status once Done is closed: -1 if it
// was killed by a signal, could not be waited for, or is still running.
func (p *Proc) ExitCode() int {
	select {
	case <-p.done:
	default:
		return -1
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// Wait waits for the process to exit and returns its exit status (as
// ExitCode). A process still running after the bound fails the test,
// showing its stderr.
func (p *Proc) Wait(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
		return p.ExitCode()
	case <-time.After(p.bound):
		t.Fatalf("pid %d still running after %s; stderr:\n%s", p.Cmd.Process.Pid, p.bound, p.stderr())
		return -1
	}
}

// WaitHTTP polls GET url until anything answers, as NeMo Gym's launcher
// polls a server it started, and returns the answer's status and body.
// The process exiting first, or nothing answering within the bound, fails
// the test, showing its stderr.
func (p *Proc) WaitHTTP(t testing.TB, url string) (status int, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), p.bound)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Do(req)
		if err == nil {
			body, err = io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
			return res.StatusCode, body
		}
		select {
		case <-p.done:
			t.Fatalf("exited %d before serving; stderr:\n%s", p.ExitCode(), p.stderr())
		case <-ctx.Done():
			t.Fatalf("nothing answers GET %s after %s (%v); stderr:\n%s", url, p.bound, err, p.stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stderr is the captured stderr, for failure messages.
func (p *Proc) stderr() string {
	if p.Stderr == nil {
		return "(not captured)"
	}
	return p.Stderr.String()
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitStderr waits until the process's captured stderr contains s and
// fails the test when it does not within the bound. A server may answer
// its first request before the line it logged on start-up has crossed the
// pipe, so a test that reads the log after WaitHTTP waits for it here.
func (p *Proc) WaitStderr(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(p.bound)
	for !strings.Contains(p.Stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q after %s:\n%s", s, p.bound, p.stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
