package testenv

import (
	"runtime"
	"strings"
)

// AliasBomb returns the "billion laughs" YAML document: anchors a to i,
// nine levels of nine aliases (9^9 strings once expanded), followed by use,
// which refers to the top anchor (*i) wherever it wants the expansion.
func AliasBomb(use string) string {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for c := 'b'; c <= 'i'; c++ {
		p := string(c - 1)
		b.WriteString(string(c) + ": &" + string(c) + " [" + strings.Repeat("*"+p+",", 8) + "*" + p + "]\n")
	}
	b.WriteString(use)
	return b.String()
}

// AllocatedBy returns the bytes the process allocated while f ran, counted
// from a fresh garbage collection.
func AllocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
