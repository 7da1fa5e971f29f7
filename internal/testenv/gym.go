package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
