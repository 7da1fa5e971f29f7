package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gymlens/gymlens/protocol"
)

// livenessPattern matches exactly "/" (GET / is upstream's liveness
// route); the bare "/" pattern would match every path.
const livenessPattern = "/{$}"

type rolloutKey struct{}

// RolloutID returns the rollout id a request's /ng-rollout/<id> prefix
// carried, or "" (see Options.RolloutPrefix).
func RolloutID(ctx context.Context) string {
	id, _ := ctx.Value(rolloutKey{}).(string)
	return id
}

// stripRolloutPrefix routes /ng-rollout/<id>/<rest> as /<rest>, with the
// id in the request's context. It takes off what upstream's servers take
// off and nothing more: a resources server's RolloutContextMiddleware
// (nemo_gym 0.7.0 rollout_correlation.py:97-118, the id as
// ROLLOUT_ID_PATTERN at :38) and a model server's _ROLLOUT_PATH_RE
// (base_responses_api_model.py:1059-1063, any id without a slash, then an
// optional /training-token-capture), both matched against the decoded
// path; see upstreamRest for their end.
func stripRolloutPrefix(mode PrefixMode, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, protocol.RolloutPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		var id, rest string
		var ok bool
		if mode == PrefixModel {
			id, rest, _, ok = protocol.SplitModelRolloutPath(r.URL.Path)
		} else {
			id, rest, ok = protocol.SplitRolloutPath(r.URL.Path)
		}
		if ok {
			rest, ok = upstreamRest(rest)
		}
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		r2 := r.WithContext(context.WithValue(r.Context(), rolloutKey{}, id))
		u := *r.URL
		u.Path, u.RawPath = rest, ""
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// upstreamRest applies the end of upstream's prefix patterns,
// (?P<rest>/.*)$ in Python's re: "." takes no newline and "$" also
// matches before a newline that ends the string. So a rest holding a
// newline is no match, except for one newline at its very end, which is
// dropped (the routed path is the group, without it).
func upstreamRest(rest string) (string, bool) {
	i := strings.IndexByte(rest, '\n')
	switch {
	case i < 0:
		return rest, true
	case i == len(rest)-1:
		return rest[:i], true
	}
	return "", false
}

type sessionKey struct{}

// SessionID returns the session id of a request to a server with a
// session cookie (Options.SessionCookie), or "".
func SessionID(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}

// sessionIDLen is the length of a minted session id: 128 random bits in
// hex.
const sessionIDLen = 32

// sessionMaxAge is the cookie lifetime upstream's session middleware
// gives, 14 days.
const sessionMaxAge = 14 * 24 * 3600

// sessions keeps a session id per caller in a cookie set on every
// response, as upstream's servers do: callers hold on to the cookies of
// the latest response only, so every response must carry it.
func sessions(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ""
		if c, err := r.Cookie(name); err == nil && validSessionID(c.Value) {
			id = c.Value
		} else {
			var b [sessionIDLen / 2]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		http.SetCookie(w, &http.Cookie{Name: name, Value: id, Path: "/", MaxAge: sessionMaxAge,
			HttpOnly: true, SameSite: http.SameSiteLaxMode})
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, id)))
	})
}

func validSessionID(v string) bool {
	if len(v) != sessionIDLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
