package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EnvPython names the variable that points the tests at an interpreter
// with upstream installed; scripts/upstream.sh prints that path last.
const EnvPython = "GYMLENS_UPSTREAM_PYTHON"

// EnvTelemetryPython names the variable that points the tests at an
// interpreter with nemo-gym 0.6.0 installed (scripts/upstream.sh --release
// 0.6.0): no later release exports telemetry with a released nemo-lens, so
// 0.6.0's telemetry functions are the reference for what upstream emits.
const EnvTelemetryPython = "GYMLENS_UPSTREAM_TELEMETRY_PYTHON"

// LockFile is the lock scripts/upstream.sh installs nemo-gym 0.7.0 from,
// relative to the module root. The cache directory of an install is keyed
// by its lock's hash.
const LockFile = "scripts/upstream/requirements.lock"

// TelemetryLockFile is the lock of nemo-gym 0.6.0 (see EnvTelemetryPython).
const TelemetryLockFile = "scripts/upstream/requirements-0.6.0.lock"

// Find returns the interpreter that has nemo-gym 0.7.0 installed: $EnvPython
// when set, else the venv scripts/upstream.sh left in its cache for the
// current lock. The error says how to install it.
func Find() (string, error) { return find(EnvPython, LockFile, "scripts/upstream.sh") }

// FindTelemetry is Find for nemo-gym 0.6.0 (EnvTelemetryPython).
func FindTelemetry() (string, error) {
	return find(EnvTelemetryPython, TelemetryLockFile, "scripts/upstream.sh --release 0.6.0")
}

func find(envVar, lockFile, install string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", envVar, p, err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(root, lockFile))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	cache := os.Getenv("GYMLENS_UPSTREAM_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "gymlens", "upstream")
	}
	venv := filepath.Join(cache, hex.EncodeToString(sum[:])[:16], "venv")
	if _, err := os.Stat(filepath.Join(venv, ".gymlens-complete")); err != nil {
		return "", fmt.Errorf("upstream NeMo Gym is not installed: run %s", install)
	}
	return filepath.Join(venv, "bin", "python"), nil
}

// ModuleRoot returns the directory of gymlens's go.mod, found upwards from
// the working directory (a test's is its package directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Python returns the interpreter that has nemo-gym 0.7.0 installed, or
// skips the test (fails it under CI=true) when there is none.
func Python(t testing.TB) string {
	t.Helper()
	return need(t, Find)
}

// TelemetryPython is Python for nemo-gym 0.6.0 (EnvTelemetryPython).
func TelemetryPython(t testing.TB) string {
	t.Helper()
	return need(t, FindTelemetry)
}

func need(t testing.TB, find func() (string, error)) string {
	t.Helper()
	p, err := find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the interop tests must run)", err)
		}
		t.Skip(err.Error())
	}
	return p
}

// Bin returns the path of a console script of upstream's venv (gym, ng_run,
// ...), next to its interpreter.
func Bin(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(filepath.Dir(Python(t)), name)
}

// Run runs a Python program with upstream's interpreter, stdin as its
// input, bounded by timeout, and returns its standard output. A non-zero
// exit fails the test with the program's standard error.
func Run(t testing.TB, timeout time.Duration, program string, stdin []byte, args ...string) []byte {
	t.Helper()
	return RunWith(t, Python(t), timeout, program, stdin, args...)
}

// RunWith is Run with the interpreter py (TelemetryPython's, say).
func RunWith(t testing.TB, py string, timeout time.Duration, program string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-c", program}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0")
	if err := cmd.Run(); err != nil {
		t.Fatalf("upstream python: %v\n%s", err, tail(errOut.String(), 4000))
	}
	return out.Bytes()
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
