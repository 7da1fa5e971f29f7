package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// allocSink keeps the test's allocations on the heap.
var allocSink [][]byte

// parseRunStats reads the lines of a .runstats file into maps.
func parseRunStats(t *testing.T, path string) []map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]string
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if line == "" {
			continue
		}
		m := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("field %q in %q is not key=value", kv, line)
			}
			m[k] = v
		}
		lines = append(lines, m)
	}
	return lines
}

func TestRunStatsOnSignalAndExit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(RunStatsDirEnv, dir)
	stop := startRunStats("probe", slog.New(slog.DiscardHandler))
	if stop == nil {
		t.Fatal("startRunStats returned nil with the directory set")
	}
	path := filepath.Join(dir, "probe.runstats")
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if raw, _ := os.ReadFile(path); len(raw) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no line written after SIGUSR1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	garbage := make([][]byte, 0, 1000)
	for range 1000 {
		garbage = append(garbage, make([]byte, 64))
	}
	allocSink = garbage
	// Small allocations reach the runtime/metrics counters when a P's cache
	// is flushed; a collection flushes them all.
	runtime.GC()
	stop()

	lines := parseRunStats(t, path)
	if len(lines) != 2 || lines[0]["event"] != "signal" || lines[1]["event"] != "exit" {
		t.Fatalf("lines %v, want one on the signal and one at exit", lines)
	}
	for _, key := range []string{"time_ns", "mallocs", "alloc_bytes", "gc_cycles", "heap_live_bytes", "goroutines", "gogc", "user_us", "sys_us", "max_rss_kib"} {
		for i, l := range lines {
			if _, err := strconv.ParseUint(l[key], 10, 64); err != nil {
				t.Errorf("line %d: %s=%q is not a count", i, key, l[key])
			}
		}
	}
	before, _ := strconv.ParseUint(lines[0]["mallocs"], 10, 64)
	after, _ := strconv.ParseUint(lines[1]["mallocs"], 10, 64)
	if after < before+1000 {
		t.Errorf("mallocs went from %d to %d across 1000 allocations", before, after)
	}
}

func TestRunStatsOffByDefault(t *testing.T) {
	t.Setenv(RunStatsDirEnv, "")
	if stop := startRunStats("probe", slog.New(slog.DiscardHandler)); stop != nil {
		stop()
		t.Fatal("startRunStats started without the directory set")
	}
}

func TestMemProfileRateEnv(t *testing.T) {
	prev := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = prev })
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		value string
		want  int
	}{
		{"", prev},        // unset: the runtime's default stays
		{"0", prev},       // not positive: ignored
		{"-3", prev},      // not positive: ignored
		{"1 k", prev},     // not an integer: ignored
		{"1", 1},          // every allocation
		{" 4_096 ", 4096}, // read like every integer of the environment
	} {
		runtime.MemProfileRate = prev
		t.Setenv(MemProfileRateEnv, c.value)
		setMemProfileRate(log)
		if runtime.MemProfileRate != c.want {
			t.Errorf("%s=%q: MemProfileRate %d, want %d", MemProfileRateEnv, c.value, runtime.MemProfileRate, c.want)
		}
	}
}
