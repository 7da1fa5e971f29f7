package orchestrator

// Tests of config.go's address check.

import "testing"

func TestCheckAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":0", "localhost:0"} {
		if err := checkAddr(addr); err != nil {
			t.Errorf("checkAddr(%q) = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1", "127.0.0.1:", "[::1"} {
		if err := checkAddr(addr); err == nil {
			t.Errorf("checkAddr(%q) accepted", addr)
		}
	}
}
