package contract

import (
	"fmt"
	"net"
)

// DefaultHost is the host every gymlens listener binds when its address
// names none: this machine only, as in NeMo Gym (its default_host).
// Listening on every interface must be asked for by name, 0.0.0.0 or [::].
const DefaultHost = "127.0.0.1"

// ListenAddr returns the address to listen on for addr ("host:port"): an
// empty host (":0", ":9464") becomes DefaultHost, where net.Listen would
// take it for every interface. An address without a port is an error.
// Every listener of a fleet resolves its configured address through it.
func ListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port == "" {
		return "", fmt.Errorf("address %s: missing port", addr)
	}
	if host == "" {
		host = DefaultHost
	}
	return net.JoinHostPort(host, port), nil
}
