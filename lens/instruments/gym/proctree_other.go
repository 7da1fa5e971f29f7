//go:build !linux

package gym

// readTree is nil outside Linux: the standard library has no portable way
// to list a process's descendants, so the process tree gauges are not
// registered there.
var readTree func() (treeReading, bool)
