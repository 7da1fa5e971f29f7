package main

import (
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/orchestrator"
)

// listeners returns the local addresses of the TCP sockets process pid
// listens on, read from /proc: its socket inodes, matched in
// /proc/<pid>/net/tcp and tcp6 (state 0A, LISTEN).
func listeners(t *testing.T, pid int) []net.IP {
	t.Helper()
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Skipf("no /proc to read sockets from: %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []net.IP
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			host, _, _ := strings.Cut(f[1], ":")
			raw, err := hex.DecodeString(host)
			if err != nil {
				t.Fatalf("%s: %q: %v", table, f[1], err)
			}
			// /proc prints each 32-bit word of the address in host
			// (little-endian) order.
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			out = append(out, net.IP(raw))
		}
	}
	return out
}

// An address with an empty host is loopback for every listener of a gym
// process, the server's own (--addr :0) and its prometheus endpoint
// (PROMETHEUS_ADDR=:0): nothing listens on every interface unless
// 0.0.0.0 is written out.
func TestEmptyHostListensOnLoopbackOnly(t *testing.T) {
	testenv.ClearTelemetry(t)
	cmd := exec.Command(gymBin, "serve", "resources_servers", "--name", "r", "--addr", ":0")
	cmd.Env = append(os.Environ(), "NEMO_GYM_OTEL_ENABLED=1", "NEMO_GYM_OTEL_EXPORTER=prometheus", "NEMO_GYM_OTEL_PROMETHEUS_ADDR=:0")
	p := testenv.Start(t, cmd, launchTimeout)
	deadline := time.Now().Add(launchTimeout)
	for !strings.Contains(p.Stdout.String(), orchestrator.ReadyPrefix) {
		select {
		case <-p.Done():
			t.Fatalf("gymlens serve exited %d before it was ready:\n%s", p.ExitCode(), p.Stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("gymlens serve not ready after %s:\n%s", launchTimeout, p.Stderr.String())
		}
	}
	addrs := listeners(t, cmd.Process.Pid)
	t.Logf("gymlens serve listens on %v", addrs)
	if len(addrs) != 2 {
		t.Errorf("%d listening sockets %v, want 2 (the server and its prometheus endpoint)", len(addrs), addrs)
	}
	for _, ip := range addrs {
		if !ip.IsLoopback() {
			t.Errorf("listening on %v, want loopback only", ip)
		}
	}
}
