package testenv

import (
	"net"
	"sync"
	"testing"
)

// BlackHole listens on loopback, accepts every connection and never reads
// from or answers one: a collector that hangs. It returns the listener's
// http:// URL and a function counting the connections accepted so far.
// The listener and its connections are closed, and the accept goroutine
// awaited, when tb ends.
func BlackHole(tb testing.TB) (url string, accepted func() int) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}
