package contract

import (
	"fmt"
	"strings"
)

// DefaultHost is the host every gymlens listener binds when its address
// names none: this machine only, as in NeMo Gym (its default_host).
// Listening on every interface must be asked for by name, 0.0.0.0 or [::].
const DefaultHost = "127.0.0.1"

// ListenAddr returns the address to listen on for addr ("host:port",
// "[v6 host]:port"): an empty host (":0", ":9464") becomes DefaultHost,
// where net.Listen would take it for every interface. An address without
// a port is an error. Every listener of a fleet resolves its configured
// address through it. It splits addr as net.SplitHostPort does (the
// package stays free of net, which links the C resolver).
func ListenAddr(addr string) (string, error) {
	host, port, err := splitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port == "" {
		return "", fmt.Errorf("address %s: missing port", addr)
	}
	if host == "" {
		host = DefaultHost
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port, nil
	}
	return host + ":" + port, nil
}

// splitHostPort splits "host:port", "[host]:port" or "[host%zone]:port"
// into host and port, with net.SplitHostPort's rules and errors.
func splitHostPort(addr string) (host, port string, err error) {
	fail := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("address %s: %s", addr, why)
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return fail("missing port in address")
	}
	if addr[0] == '[' {
		end := strings.IndexByte(addr, ']')
		switch {
		case end < 0:
			return fail("missing ']' in address")
		case end+1 == len(addr):
			return fail("missing port in address")
		case end+1 != i:
			if addr[end+1] == ':' {
				return fail("too many colons in address")
			}
			return fail("missing port in address")
		}
		host = addr[1:end]
		if strings.ContainsAny(addr[end+1:], "[]") || strings.IndexByte(addr[1:], '[') >= 0 {
			return fail("unexpected '[' in address")
		}
	} else {
		host = addr[:i]
		if strings.IndexByte(host, ':') >= 0 {
			return fail("too many colons in address")
		}
		if strings.ContainsAny(host, "[]") {
			return fail("unexpected '[' in address")
		}
	}
	port = addr[i+1:]
	if strings.ContainsAny(port, "[]") {
		return fail("unexpected ']' in address")
	}
	return host, port, nil
}
