package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// BearerToken checks the token a request carries as "Authorization:
// Bearer <token>": the head server's guard and a gymlens server's own
// /gymlens/ routes share it. It keeps the token's SHA-256 only, and
// compares digests, so a check takes the same time whatever the guess.
type BearerToken struct {
	sum [sha256.Size]byte
}

// NewBearerToken returns the check of token.
func NewBearerToken(token string) BearerToken {
	return BearerToken{sum: sha256.Sum256([]byte(token))}
}

// Authorized reports whether r carries the token as a bearer token (the
// scheme's case aside, spaces around the token trimmed).
func (t BearerToken) Authorized(r *http.Request) bool {
	scheme, given, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(given)))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}
