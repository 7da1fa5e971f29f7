//go:build linux

package gym

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// startChild starts `sleep 30` and kills it, by its pid, when the test
// ends.
func startChild(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child process: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return pid
}

func selfRSS(t *testing.T) uint64 {
	t.Helper()
	return residentPages("/proc", os.Getpid()) * uint64(os.Getpagesize())
}

func TestReadProcTreeFindsChild(t *testing.T) {
	child := startChild(t)
	r, ok := readProcTree("/proc", os.Getpid())
	if !ok {
		t.Fatal("could not read /proc")
	}
	var pids []int
	for k := range r.cpu {
		pids = append(pids, k.pid)
	}
	found := false
	for _, p := range pids {
		found = found || p == child
	}
	if !found {
		t.Fatalf("child %d not in the tree %v", child, pids)
	}
	if self := selfRSS(t); r.rssBytes < self/2 {
		t.Fatalf("tree rss %d below half this process's %d", r.rssBytes, self)
	}
	if len(pids) < 2 {
		t.Fatalf("tree has %d processes, want this one and the child", len(pids))
	}
}

// readStat copes with a command name holding spaces and parentheses.
func TestReadStatOddCommandName(t *testing.T) {
	root := t.TempDir()
	dir := root + "/42"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := "42 (a b) (c)) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 12345 1000 10 18446744073709551615\n"
	if err := os.WriteFile(dir+"/stat", []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	st, ok := readStat(root, 42)
	if !ok || st.ppid != 7 || st.ticks != 300 || st.startTicks != 12345 {
		t.Fatalf("readStat = %+v, %v; want ppid 7, ticks 300, start 12345", st, ok)
	}
	if err := os.WriteFile(dir+"/statm", []byte("500 123 10 1 0 100 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := residentPages(root, 42); got != 123 {
		t.Fatalf("residentPages = %d, want 123", got)
	}
	if _, ok := readProcTree(root, 99); ok {
		t.Fatal("a tree without its root read as ok")
	}
	if r, ok := readProcTree(root, 42); !ok || r.rssBytes != 123*uint64(os.Getpagesize()) || r.cpu[procKey{42, 12345}] == 0 {
		t.Fatalf("readProcTree = %+v, %v", r, ok)
	}
}

// The gauges go through a real pipeline: the tree's memory is at least
// this process's, with a child running.
func TestProcessTreeGaugesThroughManualReader(t *testing.T) {
	startChild(t)
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ins, err := New(lens.OnMeter(mp.Meter(contract.MeterScope)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ins.Close() })
	self := float64(selfRSS(t)) / (1 << 20)

	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	for _, name := range []string{contract.ProcessTreeMemoryUsed, contract.ProcessTreeCPUPercent} {
		m, ok := got[name]
		if !ok {
			t.Fatalf("%s not exported", name)
		}
		in := contract.MustLookup(name)
		g, ok := m.Data.(metricdata.Gauge[float64])
		if !ok || len(g.DataPoints) != 1 {
			t.Fatalf("%s: %T %+v, want one float64 gauge point", name, m.Data, m.Data)
		}
		if m.Unit != in.Unit || m.Description != in.Description {
			t.Errorf("%s unit %q description %q, want %q %q", name, m.Unit, m.Description, in.Unit, in.Description)
		}
		if g.DataPoints[0].Attributes.Len() != 0 {
			t.Errorf("%s has attributes %v", name, g.DataPoints[0].Attributes)
		}
		if v := g.DataPoints[0].Value; v < 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	mem := got[contract.ProcessTreeMemoryUsed].Data.(metricdata.Gauge[float64]).DataPoints[0].Value
	// The reading of this process alone was taken before the collection;
	// its RSS only grows in between by what the collection allocates, so
	// allow a little slack downwards for pages the kernel reclaimed.
	if mem < self*0.9 {
		t.Fatalf("tree memory %.2f MiB below this process's %.2f MiB", mem, self)
	}
}

// CPU percent is the tree's CPU time over wall time between samples; a
// sample sooner than minCPUWindow repeats the last value.
func TestTreeSamplerCPUPercent(t *testing.T) {
	readings := []treeReading{
		{rssBytes: 1 << 20, cpu: map[procKey]time.Duration{{1, 1}: time.Second}},
		{rssBytes: 2 << 20, cpu: map[procKey]time.Duration{{1, 1}: 2 * time.Second, {2, 5}: 500 * time.Millisecond}},
		{rssBytes: 2 << 20, cpu: map[procKey]time.Duration{{1, 1}: 3 * time.Second}},
		// pid 1 restarted (another start time): counted from zero.
		{rssBytes: 3 << 20, cpu: map[procKey]time.Duration{{1, 9}: time.Second}},
	}
	clock := time.Unix(1000, 0)
	n := 0
	ts := &treeSampler{
		read: func() (treeReading, bool) { r := readings[n]; n++; return r, true },
		now:  func() time.Time { return clock },
	}
	ts.last, _ = ts.read()
	ts.lastAt = clock

	clock = clock.Add(2 * time.Second)
	mib, pct, ok := ts.sample()
	if !ok || mib != 2 || pct != 75 { // 1.5 s of CPU in 2 s
		t.Fatalf("sample 1 = %v MiB %v%% %v, want 2 MiB 75%%", mib, pct, ok)
	}
	clock = clock.Add(100 * time.Millisecond) // too soon: last value again
	if _, pct, _ := ts.sample(); pct != 75 {
		t.Fatalf("early sample %v%%, want the last value 75%%", pct)
	}
	clock = clock.Add(900 * time.Millisecond)
	if mib, pct, _ := ts.sample(); mib != 3 || pct != 100 {
		t.Fatalf("sample 3 = %v MiB %v%%, want 3 MiB and 1 s of CPU in the 1 s since sample 1", mib, pct)
	}
}
