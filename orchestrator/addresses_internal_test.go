package orchestrator

// Tests of addresses.go.

import "testing"

func TestDialHost(t *testing.T) {
	for host, want := range map[string]string{"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "localhost": "localhost", "10.1.2.3": "10.1.2.3"} {
		if got := dialHost(host); got != want {
			t.Errorf("dialHost(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestPickMetricsAddr(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1:0"} {
		got, err := pickMetricsAddr(addr)
		if err != nil || len(got) <= len("127.0.0.1:") || got[:10] != "127.0.0.1:" || got == "127.0.0.1:0" {
			t.Errorf("pickMetricsAddr(%q) = %q, %v; want a concrete loopback port", addr, got, err)
		}
	}
	if got, err := pickMetricsAddr("127.0.0.1:9464"); err != nil || got != "127.0.0.1:9464" {
		t.Errorf("a fixed address came back as %q, %v", got, err)
	}
}
