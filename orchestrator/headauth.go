package orchestrator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/server"
)

// HeadOpenKey is the top-level fleet-config switch that leaves NeMo Gym's
// own head routes (GET /, /global_config_dict_yaml, /server_instances)
// open without the head token on a head server bound to an address other
// than loopback, for upstream's Python clients on other hosts, which
// cannot send a token. gymlens's own routes ask for the token whatever
// it says. A gymlens key, not one of upstream's.
const HeadOpenKey = "gymlens_head_open"

// headTokenBytes is how much randomness a generated head token carries.
const headTokenBytes = 32

// NewHeadToken returns a fresh head token: 32 random bytes, in hex.
func NewHeadToken() (string, error) {
	b := make([]byte, headTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("head token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// CheckHeadToken refuses a token that cannot travel in an Authorization
// header or is too short to guess at.
func CheckHeadToken(token string) error {
	if len(token) < 16 {
		return fmt.Errorf("%s: a head token needs at least 16 characters", contract.EnvHeadToken)
	}
	for _, r := range token {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("%s: a head token is printable ASCII without spaces", contract.EnvHeadToken)
		}
	}
	return nil
}

// writeHeadToken writes token to runDir/head_token, readable by its owner
// only (a file left by an earlier run of the same directory is replaced).
func writeHeadToken(runDir, token string) error {
	path := filepath.Join(runDir, contract.RunHeadTokenFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("head token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, contract.RunFilePerm)
	if err != nil {
		return fmt.Errorf("head token: %w", err)
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // no half-written token
		return fmt.Errorf("head token: %w", err)
	}
	return nil
}

// headGuard decides which requests the head server answers.
type headGuard struct {
	// token checks a request's bearer token in constant time.
	token server.BearerToken
	// upstreamOpen leaves NeMo Gym's routes open without a token.
	upstreamOpen bool
}

// newHeadGuard guards a head server bound to host: NeMo Gym's routes are
// open on a loopback host (upstream's clients on this machine cannot send
// a token) or when open says so; gymlens's need the token always.
func newHeadGuard(token, host string, open bool) *headGuard {
	return &headGuard{token: server.NewBearerToken(token), upstreamOpen: open || isLoopbackHost(host)}
}

// isLoopbackHost reports whether a head host binds loopback only.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authorized reports whether r carries the head token as a bearer token.
func (g *headGuard) authorized(r *http.Request) bool { return g.token.Authorized(r) }

// guard wraps a route: upstream marks one of NeMo Gym's own routes.
func (g *headGuard) guard(upstream bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if (!upstream || !g.upstreamOpen) && !g.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gymlens head server"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{
				"detail": "this head server wants its head token (" + contract.EnvHeadToken + ", or the run directory's " +
					contract.RunHeadTokenFile + ") as Authorization: Bearer",
			})
			return
		}
		h(w, r)
	}
}

// BearerTransport sends token as a bearer token on every request it
// carries, through Base (http.DefaultTransport when nil). Give it only to
// a client that talks to the head server: the token is the head's.
type BearerTransport struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.Token == "" {
		return base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.Token)
	return base.RoundTrip(r)
}

// HeadOpen reads HeadOpenKey from the config dict: false when absent; a
// value that is not a boolean is an error.
func (c Config) HeadOpen() (bool, error) {
	if c.resolved == nil {
		return false, nil
	}
	v, ok := c.resolved.Root[HeadOpenKey]
	if !ok || v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s: %v: want true or false", HeadOpenKey, v)
	}
	return b, nil
}

// CloseIdleConnections closes the idle connections of the base
// transport, so that http.Client.CloseIdleConnections reaches it.
func (t *BearerTransport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
