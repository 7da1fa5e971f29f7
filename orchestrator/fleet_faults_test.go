package orchestrator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/telemetry"
)

// chattyBytes is what the chatty stub writes to each of stdout and stderr
// per request.
const chattyBytes = 16 << 10

// syncLog is a goroutine-safe buffer for a test's logger.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// capturingLogger logs to the test's output and to the returned buffer.
func capturingLogger(t *testing.T) (*slog.Logger, *syncLog) {
	buf := &syncLog{}
	return slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), buf), nil)), buf
}

// mountTmpfs mounts a tmpfs of the given size on dir for the rest of the
// test, or skips the test when that is not possible (not root, no mount).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// fillDisk writes path until the file system is full and returns its size.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// Issue 16, item 1: a full disk must not kill a server through its own
// output. The run directory is a 256 KiB tmpfs, filled before the fleet
// starts; the server writes 32 KiB of output per request. Every request
// must be answered, the server must stay up, the loss must be counted and
// logging must resume once there is room again.
func TestFleetFullDiskKeepsServersAlive(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	mountTmpfs(t, runDir, "256k")
	guardRunDir(t, runDir)
	for _, sub := range []string{contract.RunLogsDir, contract.RunTelemetryDir} {
		if err := os.MkdirAll(filepath.Join(runDir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	filler := filepath.Join(runDir, "filler")
	filled := fillDisk(t, filler)
	t.Logf("tmpfs full after %d bytes", filled)

	log, logs := capturingLogger(t)
	f := startFleet(t, stubFleet(t, "", "chatty"), orchestrator.Options{
		RunDir: runDir, Logger: log, ExtraEnv: []string{stubEnv + "=chatty"},
	})
	srv := f.Servers()[0]
	const requests = 200 // 6.4 MiB of output onto a full disk
	for i := range requests {
		if code := get(t, srv.URL+"/"); code != 200 {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	if !alive(srv.PID) {
		t.Fatalf("the server (pid %d) died writing its output to a full disk", srv.PID)
	}
	noExitPending(t, f)
	if n := strings.Count(logs.String(), "server log write failed"); n != 1 {
		t.Errorf("%d warnings about the failed log writes, want exactly 1:\n%s", n, logs.String())
	}
	logPath := filepath.Join(runDir, contract.RunLogsDir, contract.LogFileName(srv.Spec.Name))

	// Room again: logging resumes, saying how much was lost.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if code := get(t, srv.URL+"/"); code != 200 {
			t.Fatalf("request %d after freeing the disk: status %d", i, code)
		}
	}
	if err := f.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("bytes of this server's output were lost")) || !bytes.Contains(b, []byte("xxxx\n")) {
		t.Errorf("log after freeing the disk (%d bytes) lacks the loss note or the new output", len(b))
	}
	lostLine := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "server log incomplete") {
			lostLine = l
		}
	}
	// At least the output of every request but the few that fitted.
	if lostLine == "" || !strings.Contains(lostLine, "lost_bytes=") {
		t.Errorf("no total of the lost bytes logged at exit:\n%s", logs.String())
	} else {
		var lost int64
		_, _ = fmt.Sscan(lostLine[strings.Index(lostLine, "lost_bytes=")+len("lost_bytes="):], &lost)
		t.Logf("lost %d bytes of output while the disk was full", lost)
		if lost < int64(requests-10)*2*chattyBytes {
			t.Errorf("lost_bytes=%d, want about %d", lost, requests*2*chattyBytes)
		}
	}
	wantNoLeftovers(t, runDir)
}

// sigstop stops pid for the rest of the test; cleanup resumes it (a
// stopped process is killed all the same, but a resumed one goes
// quietly).
func sigstop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
}

// Issue 16, item 2: a server that stops answering (SIGSTOP) is detected by
// the liveness probes within LivenessBudget + LivenessInterval +
// LivenessTimeout, killed and reported on Exits.
func TestFleetKillsAServerThatStopsAnswering(t *testing.T) {
	testenv.ClearTelemetry(t)
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	opts := orchestrator.Options{
		RunDir: runDir, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"},
		LivenessInterval: 200 * time.Millisecond, LivenessTimeout: 300 * time.Millisecond, LivenessBudget: time.Second,
	}
	bound := opts.LivenessBudget + opts.LivenessInterval + opts.LivenessTimeout
	f := startFleet(t, orchestrator.DefaultConfig(), opts)
	// Healthy servers are left alone for several probe rounds.
	time.Sleep(3 * bound)
	noExitPending(t, f)

	var victim orchestrator.ServerInfo
	for _, s := range f.Servers() {
		if s.Spec.Name == "policy_model" {
			victim = s
		}
	}
	t0 := time.Now()
	sigstop(t, victim.PID)
	select {
	case ex := <-f.Exits():
		took := time.Since(t0)
		t.Logf("hung server reported %s after SIGSTOP (bound %s): %v", took.Round(time.Millisecond), bound, ex.Err)
		if ex.Name != victim.Spec.Name || ex.PID != victim.PID {
			t.Errorf("exit of %s (pid %d), want %s (pid %d)", ex.Name, ex.PID, victim.Spec.Name, victim.PID)
		}
		if !errors.Is(ex.Err, orchestrator.ErrUnresponsive) || !strings.Contains(ex.Err.Error(), "stopped answering") {
			t.Errorf("exit error %v, want one saying it stopped answering", ex.Err)
		}
		// The probes run on a loaded machine too: allow scheduling slack
		// on top of the bound, but not another round of probes.
		if took > bound+time.Second {
			t.Errorf("detected after %s, want within %s", took, bound)
		}
	case <-time.After(bound + 20*time.Second):
		t.Fatalf("no exit reported %s after SIGSTOP (bound %s)", bound+20*time.Second, bound)
	}
	if !gone(victim.PID) {
		t.Errorf("the hung server (pid %d) still exists", victim.PID)
	}
	if n := f.Active(); n != 3 {
		t.Errorf("Active() = %d after the kill, want 3", n)
	}
	for _, s := range f.Servers() {
		if s.Spec.Name != victim.Spec.Name && get(t, s.URL+"/health") != 200 {
			t.Errorf("%s is not healthy after its neighbour was killed", s.Spec.Name)
		}
	}
	err := f.Stop(ctxFor(t, 30*time.Second))
	wantErr(t, err, `"policy_model" had died`, "stopped answering")
	for _, name := range []string{"arithmetic", "simple_agent"} {
		if err != nil && strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("Stop blames %s, which stopped cleanly: %v", name, err)
		}
	}
	noExitPending(t, f)
	wantNoLeftovers(t, runDir)
}

// activeExporter keeps every exported value of gym.servers.active.
type activeExporter struct {
	mu   sync.Mutex
	vals []int64
}

func (e *activeExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (e *activeExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *activeExporter) Export(_ context.Context, rm *metricdata.ResourceMetrics) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != serversActive {
				continue
			}
			switch g := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range g.DataPoints {
					e.vals = append(e.vals, p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range g.DataPoints {
					e.vals = append(e.vals, int64(p.Value))
				}
			}
		}
	}
	return nil
}

func (e *activeExporter) ForceFlush(context.Context) error { return nil }
func (e *activeExporter) Shutdown(context.Context) error   { return nil }

func (e *activeExporter) values() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int64
	for i, v := range e.vals {
		if i == 0 || v != e.vals[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Issue 16, item 10: every value gym.servers.active takes is exported,
// however soon the next one follows: with a periodic export an hour apart,
// a death and the stop after it read 3, 2, 1, 0 (they read 3, 0).
func TestFleetExportsEveryActiveCount(t *testing.T) {
	testenv.ClearTelemetry(t)
	t.Setenv("NEMO_GYM_OTEL_ENABLED", "1")
	t.Setenv("NEMO_GYM_OTEL_EXPORTER", "none")
	telemetry.ResetForTesting()
	t.Cleanup(telemetry.ResetForTesting)
	exp := &activeExporter{}
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))
	h, err := telemetry.Init(telemetry.InitOptions{ServerName: "orchestrator", ServerType: contract.ServerTypeOrchestrator, MetricReader: reader})
	if err != nil || !h.MetricsExporting() {
		t.Fatalf("telemetry.Init: %v", err)
	}
	runDir := t.TempDir()
	guardRunDir(t, runDir)
	f := startFleet(t, orchestrator.DefaultConfig(), orchestrator.Options{
		RunDir: runDir, ExtraEnv: []string{"NEMO_GYM_OTEL_ENABLED=0"},
	})
	var victim orchestrator.ServerInfo
	for _, s := range f.Servers() {
		if s.Spec.Name == "arithmetic" {
			victim = s
		}
	}
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Exits():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported within 10 s of a SIGKILL")
	}
	_ = f.Stop(ctxFor(t, 30*time.Second))
	// What the shutdown flush would export last.
	if err := h.ForceFlush(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := exp.values()
	t.Logf("gym.servers.active exported: %v", got)
	if want := []int64{4, 3, 2, 1, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gym.servers.active exported %v, want %v", got, want)
	}
}
