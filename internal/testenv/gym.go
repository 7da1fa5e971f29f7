package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildGym builds the gymlens command with the race detector into a new
// temporary directory and returns the binary's path and a function that
// removes the directory. pkgDir is the relative path from the calling
// test's package to cmd/gymlens (for example "../cmd/gymlens"). Test binaries that
// start gym processes call it once, from TestMain.
func BuildGym(prefix, pkgDir string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "gymlens")
	build := exec.Command("go", "build", "-race", "-o", bin, pkgDir)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build gym: %w", err)
	}
	return bin, remove, nil
}

// RunWithGym is the body of a TestMain whose tests start the gymlens
// command: it builds the command once with BuildGym (prefix and pkgDir as
// there), stores the binary's path in *bin, runs the tests and removes the
// binary again. It returns the exit code for os.Exit; a failed build is
// reported on standard error and returns 1 without running any test.
func RunWithGym(m *testing.M, prefix, pkgDir string, bin *string) int {
	path, remove, err := BuildGym(prefix, pkgDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	*bin = path
	return m.Run()
}
