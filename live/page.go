package live

import (
	_ "embed"
	"net/http"
)

//go:embed assets/live.html
var pageHTML []byte

// Page serves the live page: one HTML document with its script and
// styles inline (no external asset), which reads StatusPath (relative
// to itself: mount both under the same prefix) every two seconds and
// draws the run: its counts, a chart of rate and success over the run,
// the agents and their stages, and the rollouts, each with its steps on
// a click and a link to its trace when the snapshot names a Jaeger UI
// (Board.SetJaegerURL). The document holds no data, so it is served
// without the head token; the data it fetches asks for it, which the
// page takes from its address's fragment (#token=..., never sent to a
// server) or asks the user for.
func Page() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// Nothing but itself: inline script and style, fetches to its own
		// origin.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'")
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(pageHTML)
	})
}
