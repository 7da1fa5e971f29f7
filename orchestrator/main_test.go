package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
)

// gymBin is the gymlens binary the fleet tests run as children. It is built
// once, with the race detector, for the whole test binary.
var gymBin string

func TestMain(m *testing.M) {
	if mode := os.Getenv(stubEnv); mode != "" {
		os.Exit(runStub(mode))
	}
	code := testenv.RunWithGym(m, "gymlens-orchestrator-", "../cmd/gymlens", &gymBin)
	// Fleets were started and stopped; none of their watchers may remain.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// procState returns the state letter and start time (in clock ticks since
// boot) of a process from /proc/<pid>/stat; ok is false when there is no
// such process.
func procState(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	// The command name is in parentheses and may hold spaces: the fields
	// that follow start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}

// alive reports whether pid is a running process. A zombie nobody has
// reaped yet counts as gone: it runs nothing and holds nothing open.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	state, _, ok := procState(pid)
	return ok && state != "Z"
}

// gone is the check after Stop: the fleet reaped its children, so the
// kernel knows no such process any more.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitGone polls until pid no longer runs, up to d. Used for processes the
// fleet does not reap itself (grandchildren, re-parented to init).
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killOnCleanup makes sure pid is dead when the test ends, whatever
// happened. The process is identified by its start time as well, so a
// recycled PID is never hit. Its process group (children are group
// leaders) goes with it.
func killOnCleanup(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	_, start, ok := procState(pid)
	if !ok {
		return
	}
	t.Cleanup(func() {
		if _, now, ok := procState(pid); ok && now == start {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// startFleet starts cfg and registers a bounded Stop plus a kill of every
// child by PID for the end of the test.
func startFleet(t *testing.T, cfg orchestrator.Config, opts orchestrator.Options) *orchestrator.Fleet {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = gymBin
	}
	if opts.RunDir == "" {
		opts.RunDir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	f, err := orchestrator.Start(ctxFor(t, 60*time.Second), cfg, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	for _, s := range f.Servers() {
		killOnCleanup(t, s.PID)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = f.Stop(ctx)
	})
	return f
}

// testLogger sends the orchestrator's logs to the test's output, shown
// with -v or when the test fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// writeScript writes an executable shell script into dir and returns its
// path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// readPID reads a PID a script wrote to path; 0 when the file is missing.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil {
		t.Fatalf("%s: %q is not a PID", path, b)
	}
	return pid
}

// stubEnv makes the test binary a stub server instead of running tests
// (see runStub); the fleet tests run it through a command: block.
const stubEnv = "GYMLENS_ORCHESTRATOR_STUB"

// runStub is a minimal server under the launch contract: it finds itself
// in NEMO_GYM_CONFIG_DICT / NEMO_GYM_CONFIG_PATH, listens on exactly its
// block's host:port and answers every request with 200. In mode
// "stubborn" it ignores SIGTERM; in mode "chatty" every request writes
// chattyBytes to stdout and as much to stderr.
func runStub(mode string) int {
	switch mode {
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
	case "chatty": // an orderly stop is a clean exit
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM)
		go func() {
			<-stop
			os.Exit(0)
		}()
	}
	l, ok, err := gymconfig.LaunchFromEnv(os.LookupEnv)
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "stub: not launched by a fleet:", err)
		return 2
	}
	ln, err := net.Listen("tcp", l.Addr())
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "stub serving", l.Self.Name, "on", ln.Addr())
	handler := func(http.ResponseWriter, *http.Request) {}
	if mode == "chatty" {
		line := strings.Repeat("x", chattyBytes-1) + "\n"
		handler = func(http.ResponseWriter, *http.Request) {
			_, _ = os.Stdout.WriteString(line)
			_, _ = os.Stderr.WriteString(line)
		}
	}
	if err := http.Serve(ln, http.HandlerFunc(handler)); err != nil {
		fmt.Fprintln(os.Stderr, "stub:", err)
		return 1
	}
	return 0
}
