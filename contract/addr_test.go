package contract

import "testing"

func TestListenAddr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{":0", "127.0.0.1:0"},
		{":9464", "127.0.0.1:9464"},
		{"127.0.0.1:0", "127.0.0.1:0"},
		{"0.0.0.0:80", "0.0.0.0:80"},
		{"[::]:80", "[::]:80"},
		{"[::1]:0", "[::1]:0"},
		{"localhost:8080", "localhost:8080"},
	} {
		if got, err := ListenAddr(c.in); err != nil || got != c.want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "9464", "127.0.0.1", "host:", ":"} {
		if got, err := ListenAddr(bad); err == nil {
			t.Errorf("ListenAddr(%q) = %q, want an error", bad, got)
		}
	}
}
