package e2e

import (
	"bytes"
	"errors"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The process rig every test here shares: a gym process started in a
// process group of its own, its output collected line by line, its exit
// watched, and everything it started killed by PID when the test ends.

// lineLog collects a child's output as lines, safe for the writer goroutine
// exec runs and for the test reading it at the same time. Each complete
// line is also offered to onLine, with the time it arrived.
type lineLog struct {
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
	onLine  func(line string, at time.Time)
}

func (l *lineLog) Write(p []byte) (int, error) {
	now := time.Now()
	l.mu.Lock()
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	var lines []string
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	cb := l.onLine
	l.mu.Unlock()
	if cb != nil {
		for _, line := range lines {
			cb(line, now)
		}
	}
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// gymProc is a started gym process whose exit is watched.
type gymProc struct {
	cmd    *exec.Cmd
	stdout *lineLog
	stderr *lineLog
	done   chan struct{} // closed once Wait returned
	err    error         // Wait's result, valid after done
}

// startGymProc starts the gymlens binary in a process group of its own. The
// test's cleanup kills that group if the process is still running.
func startGymProc(t *testing.T, env []string, stdout, stderr *lineLog, args ...string) *gymProc {
	t.Helper()
	return startProc(t, env, stdout, stderr, append([]string{gymBin}, args...)...)
}

// startProc is startGymProc for any argv (the gymlens binary run inside a
// network namespace, say).
func startProc(t *testing.T, env []string, stdout, stderr *lineLog, argv ...string) *gymProc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gymProc{cmd: cmd, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// wait waits up to bound for the process to exit and returns its exit
// code; it fails the test if the process is still running then.
func (p *gymProc) wait(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(bound):
		t.Fatalf("gym %v still running %s later\nstdout:\n%s\nstderr:\n%s",
			p.cmd.Args[1:], bound, p.stdout.String(), tail(p.stderr.String(), 40))
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode() // -1 when killed by a signal
	}
	t.Fatalf("wait for gym: %v", p.err)
	return -1
}

// envProc is a running `gymlens env start` and what its start-up report said.
type envProc struct {
	*gymProc
	runID, runDir, head string
	servers             map[string]envServer // by server name
}

// envServer is one server line of the report.
type envServer struct {
	typ, url string
	pid      int
}

// startEnv runs `gymlens env start args...` and waits (bounded) until it has
// reported its run, its head server and want servers. Cleanup stops it
// the way a user does, SIGTERM, and fails the test if the fleet ignores
// it for 20 s or leaves a server running; either is then killed by PID.
func startEnv(t *testing.T, env []string, want int, args ...string) *envProc {
	t.Helper()
	e := &envProc{servers: map[string]envServer{}}
	var mu sync.Mutex
	ready, reported := make(chan struct{}), false
	stdout := &lineLog{onLine: func(line string, _ time.Time) {
		mu.Lock()
		defer mu.Unlock()
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "run":
			e.runID, e.runDir = f[1], strings.Trim(f[2], "()")
		case len(f) == 3 && f[0] == "head" && f[1] == "server":
			e.head = f[2]
		case len(f) == 5 && f[3] == "pid":
			if pid, err := strconv.Atoi(f[4]); err == nil {
				e.servers[f[0]] = envServer{typ: f[1], url: f[2], pid: pid}
			}
		default:
			return
		}
		if !reported && e.head != "" && e.runDir != "" && len(e.servers) == want {
			reported = true
			close(ready)
		}
	}}
	stderr := &lineLog{}
	e.gymProc = startGymProc(t, env, stdout, stderr, append([]string{"env", "start"}, args...)...)
	t.Cleanup(func() {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(20 * time.Second):
			t.Errorf("gymlens env start (pid %d) ignored SIGTERM for 20 s; killing it", e.cmd.Process.Pid)
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
			<-e.done
		}
		mu.Lock()
		defer mu.Unlock()
		for name, s := range e.servers {
			if syscall.Kill(s.pid, 0) == nil {
				t.Errorf("server %s (pid %d) outlived its fleet; killing it", name, s.pid)
				_ = syscall.Kill(s.pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("gymlens env start stdout:\n%s\nstderr (tail):\n%s", stdout.String(), tail(stderr.String(), 40))
		}
	})
	select {
	case <-ready:
	case <-e.done:
		t.Fatalf("gymlens env start ended (%v) before reporting its fleet\nstdout:\n%s\nstderr:\n%s",
			e.err, stdout.String(), tail(stderr.String(), 40))
	case <-time.After(2 * time.Minute):
		t.Fatalf("gymlens env start did not report %d servers within 2 minutes\nstdout:\n%s\nstderr:\n%s",
			want, stdout.String(), tail(stderr.String(), 40))
	}
	mu.Lock()
	defer mu.Unlock()
	// A copy, so the test reads it without the lock.
	cp := *e
	cp.servers = maps.Clone(e.servers)
	return &cp
}

// urls maps each server's name to its base URL.
func (e *envProc) urls() map[string]string {
	out := map[string]string{}
	for name, s := range e.servers {
		out[name] = s.url
	}
	return out
}

// stop sends SIGTERM and waits up to bound for a clean exit (status 0).
func (e *envProc) stop(t *testing.T, bound time.Duration) {
	t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := e.wait(t, bound); code != 0 {
		t.Fatalf("gymlens env start exited %d after SIGTERM\nstderr:\n%s", code, tail(e.stderr.String(), 40))
	}
}

// runProc is a running `gymlens run` and the servers its log says it started.
type runProc struct {
	*gymProc
	mu   sync.Mutex
	pids map[string]int // server name -> PID, from the "server up" lines
}

// startRun runs `gymlens run args...`, offers every line of its stderr to
// onLine (which may be nil), and waits (bounded) until the fleet has
// started. Cleanup continues and kills, by process group, every server the
// log named that is still alive, stopped ones included.
func startRun(t *testing.T, env []string, onLine func(line string, at time.Time), args ...string) *runProc {
	t.Helper()
	r := &runProc{pids: map[string]int{}}
	started := make(chan struct{})
	var startedOnce sync.Once
	stderr := &lineLog{onLine: func(line string, at time.Time) {
		if m := serverUpRe.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[2])
			r.mu.Lock()
			r.pids[m[1]] = pid
			r.mu.Unlock()
		}
		if strings.Contains(line, `msg="fleet started"`) {
			startedOnce.Do(func() { close(started) })
		}
		if onLine != nil {
			onLine(line, at)
		}
	}}
	r.gymProc = startGymProc(t, env, &lineLog{}, stderr, append([]string{"run"}, args...)...)
	t.Cleanup(func() {
		for _, pid := range r.servers() {
			if gymAlive(pid) {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	select {
	case <-started:
	case <-r.done:
		t.Fatalf("gymlens run ended before the fleet started: %v\nstderr:\n%s", r.err, r.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("fleet did not start within 60s\nstderr:\n%s", r.stderr.String())
	}
	return r
}

// servers returns a copy of the server name -> PID map read so far.
func (r *runProc) servers() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.pids)
}
