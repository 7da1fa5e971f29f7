package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/gymlens/gymlens/lens"
)

// CPUProfileDirEnv names a directory; when set, every gym process writes a
// CPU profile <name>.pprof there, and as it exits an allocation profile
// <name>.allocs.pprof (every allocation since start, sampled at the
// runtime's default rate; read it with -sample_index=alloc_objects or
// alloc_space). A diagnostic for performance work.
const CPUProfileDirEnv = "GYM_CPUPROFILE_DIR"

// MemProfileRateEnv, with CPUProfileDirEnv, sets the allocation
// profile's sampling rate (runtime.MemProfileRate, bytes per sample; 1
// records every allocation, so an on and an off run can be compared
// allocation by allocation, at some cost in speed). Unset, the runtime's
// default is kept. A diagnostic for performance work.
const MemProfileRateEnv = "GYM_MEMPROFILE_RATE"

// RunStatsDirEnv names a directory; when set, every gym process appends a
// line of its runtime counters to <name>.runstats there each time it
// receives SIGUSR1, and once more as it exits. Load scripts signal the
// process before and after a load window and divide the differences by the
// requests served. A diagnostic for performance work.
const RunStatsDirEnv = "GYM_RUNSTATS_DIR"

// startCPUProfile starts profiling when CPUProfileDirEnv is set and returns
// the function that stops it, or nil.
func startCPUProfile(name string, log *slog.Logger) func() {
	dir := os.Getenv(CPUProfileDirEnv)
	if dir == "" {
		return nil
	}
	setMemProfileRate(log)
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		log.Warn("cpu profile", "err", err)
		return nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Warn("cpu profile", "err", err)
		f.Close()
		return nil
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		af, err := os.Create(filepath.Join(dir, name+".allocs.pprof"))
		if err != nil {
			log.Warn("allocation profile", "err", err)
			return
		}
		defer af.Close()
		if err := pprof.Lookup("allocs").WriteTo(af, 0); err != nil {
			log.Warn("allocation profile", "err", err)
		}
	}
}

// setMemProfileRate applies MemProfileRateEnv, if set; a value that is not
// a positive integer is reported and ignored.
func setMemProfileRate(log *slog.Logger) {
	v := os.Getenv(MemProfileRateEnv)
	if v == "" {
		return
	}
	n, err := lens.ParseInt(v)
	if err != nil || n < 1 || n > math.MaxInt32 {
		log.Warn("allocation profile: ignoring "+MemProfileRateEnv+", not a positive integer", "value", v)
		return
	}
	runtime.MemProfileRate = int(n)
}

// startRunStats starts answering SIGUSR1 with a runStatsLine when
// RunStatsDirEnv is set, and returns the function that stops it after
// writing the exit line, or nil.
func startRunStats(name string, log *slog.Logger) func() {
	dir := os.Getenv(RunStatsDirEnv)
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, name+".runstats")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Warn("run stats", "err", err)
		return nil
	}
	write := func(event string) {
		if _, err := f.WriteString(runStatsLine(event)); err != nil {
			log.Warn("run stats", "path", path, "err", err)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-sig:
				write("signal")
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(quit)
		<-done
		write("exit")
		if err := f.Close(); err != nil {
			log.Warn("run stats", "path", path, "err", err)
		}
	}
}

// runStatsSamples are the runtime/metrics counters in a run-stats line.
var runStatsSamples = []string{
	"/gc/heap/allocs:objects",      // heap allocations, tiny ones excluded
	"/gc/heap/tiny/allocs:objects", // tiny allocations (together: MemStats.Mallocs)
	"/gc/heap/allocs:bytes",
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/live:bytes",
	"/sched/goroutines:goroutines",
	"/gc/gogc:percent",
}

// runStatsLine is one snapshot of the process's cumulative counters as
// space-separated key=value pairs: event, time_ns, mallocs (every heap
// allocation, as MemStats.Mallocs and testing's allocs/op count them),
// alloc_bytes, gc_cycles, heap_live_bytes, goroutines, gogc (the GC
// percent in force), the process's CPU time so far, user_us and sys_us, and
// its peak resident set size, max_rss_kib.
func runStatsLine(event string) string {
	s := make([]metrics.Sample, len(runStatsSamples))
	for i, name := range runStatsSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return fmt.Sprintf("event=%s time_ns=%d mallocs=%d alloc_bytes=%d gc_cycles=%d heap_live_bytes=%d goroutines=%d gogc=%d user_us=%d sys_us=%d max_rss_kib=%d\n",
		event, time.Now().UnixNano(), v[0]+v[1], v[2], v[3], v[4], v[5], v[6],
		ru.Utime.Nano()/1e3, ru.Stime.Nano()/1e3, ru.Maxrss)
}
