package main

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	t.Setenv("GOGC", "") // registers the restore of the caller's value
	os.Unsetenv("GOGC")
	tuneGC()
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, DefaultGCPercent)
	}

	// A GOGC of the user's own is left alone (the runtime read it at start;
	// here the percent stands in for it).
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	tuneGC()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150: GC percent %d after tuneGC, want 150 untouched", got)
	}
}
