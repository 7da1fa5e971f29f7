package orchestrator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gymlens/gymlens/live"
)

// HeadStatusSourcePath is the head server's route on which a collector
// of the fleet (`gymlens rollouts collect --head`) names its own status
// API; from then on the head's live.StatusPath relays it, so that a user
// of the fleet finds the run where the fleet is.
const HeadStatusSourcePath = HeadGymlensPrefix + "status_source"

// StatusSource is the body of POST HeadStatusSourcePath.
type StatusSource struct {
	// URL is the base URL of the collector's status listener,
	// http://HOST:PORT; it asks for the head token, as the head does.
	URL string `json:"url"`
}

// Board is the status board the head server answers live.StatusPath
// from: the run that `gymlens run` shows on it, or the collector that
// named itself on HeadStatusSourcePath.
func (f *Fleet) Board() *live.Board { return f.board }

// HeadToken is the head server's bearer token: what a client of the
// fleet's gymlens routes, and of its servers' own, sends.
func (f *Fleet) HeadToken() string { return f.headToken }

// serveStatusSource answers POST HeadStatusSourcePath: 204 once the head
// relays the collector, 400 for a body that is not a base URL.
func serveStatusSource(f *Fleet) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body StatusSource
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "want {\"url\": \"http://HOST:PORT\"}: " + err.Error()})
			return
		}
		u, err := url.Parse(body.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": fmt.Sprintf("url %q: want http://HOST:PORT", body.URL)})
			return
		}
		base := u.Scheme + "://" + u.Host
		f.board.Relay(&live.Client{Base: base, Token: f.headToken})
		f.log.Info("the head's status API now relays a collector's", "collector", base)
		w.WriteHeader(http.StatusNoContent)
	}
}
