package orchestrator

// The addresses of a fleet's servers: the base URL each answers on, the
// host to dial for a bind address, and the port of its metrics exporter.

import (
	"net"
	"strconv"

	"github.com/gymlens/gymlens/gymconfig"
)

// serverURL is the base URL spec's server answers on.
func serverURL(spec ServerSpec) string {
	return "http://" + net.JoinHostPort(dialHost(spec.Host), strconv.Itoa(spec.Port))
}

// dialHost is the address to reach a server bound to host at.
func dialHost(host string) string {
	switch {
	case host == "":
		return gymconfig.DefaultHost
	case net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
		if net.ParseIP(host).To4() == nil {
			return "::1"
		}
		return "127.0.0.1"
	}
	return host
}

// pickMetricsAddr returns addr, or a loopback port free right now when
// addr is empty or has port 0, so the address is known before the child
// starts (targets.json lists it).
func pickMetricsAddr(addr string) (string, error) {
	host := "127.0.0.1"
	if addr != "" {
		h, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", err
		}
		if port != "0" && port != "" {
			return addr, nil
		}
		host = h
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
