package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// CPUProfileDirEnv names a directory; when set, every gym process writes a
// CPU profile <name>.pprof there. A diagnostic for performance work.
const CPUProfileDirEnv = "GYM_CPUPROFILE_DIR"

// startCPUProfile starts profiling when CPUProfileDirEnv is set and returns
// the function that stops it, or nil.
func startCPUProfile(name string, log *slog.Logger) func() {
	dir := os.Getenv(CPUProfileDirEnv)
	if dir == "" {
		return nil
	}
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
	}
}
