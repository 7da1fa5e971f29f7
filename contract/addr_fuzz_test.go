package contract

import (
	"net"
	"testing"
)

// FuzzListenAddr checks the address splitter against net.SplitHostPort:
// the same addresses are accepted, with the same host and port, and the
// result of ListenAddr splits back to them (an empty host as DefaultHost).
func FuzzListenAddr(f *testing.F) {
	for _, seed := range []string{":0", "127.0.0.1:80", "[::1]:0", "[fe80::1%eth0]:9", "::1", "[::1]", "a:b:c", "[a]b:1", "[a]:", "]:1", "[:1", "h:", "", "[]:1", "x]:1", "[a]:[1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		host, port, err := splitHostPort(addr)
		nh, np, nerr := net.SplitHostPort(addr)
		if (err == nil) != (nerr == nil) {
			t.Fatalf("%q: split error %v, net.SplitHostPort %v", addr, err, nerr)
		}
		if err != nil {
			return
		}
		if host != nh || port != np {
			t.Fatalf("%q: split %q %q, net.SplitHostPort %q %q", addr, host, port, nh, np)
		}
		got, err := ListenAddr(addr)
		if port == "" {
			if err == nil {
				t.Fatalf("%q: no port accepted as %q", addr, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", addr, err)
		}
		want := host
		if want == "" {
			want = DefaultHost
		}
		if h, p, err := net.SplitHostPort(got); err != nil || h != want || p != port {
			t.Fatalf("ListenAddr(%q) = %q: splits to %q %q (%v), want %q %q", addr, got, h, p, err, want, port)
		}
	})
}
