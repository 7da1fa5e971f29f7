package agent

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/protocol"
)

// serveEpisodes answers GET live.EpisodesPath (RouteEpisodes): the agent's
// live.EpisodesReport, the episodes in flight (those of /run and of the
// /v1/responses routes, each named by its rollout id; one without an id
// is counted in the stages only) and every stage's last minute. A
// rollout's steps are its seed_session, each model call and tool call
// and its verify, with the HTTP status each was answered (0 for none).
// With a head token (Config.HeadToken) a request without it as a bearer
// token is a 401. The report holds ids, stage names, times and statuses:
// no prompt, answer, header or cookie.
func (a *agent) serveEpisodes(w http.ResponseWriter, r *http.Request) {
	if a.token != nil && !a.token.Authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gymlens"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{
			"detail": "this route wants the fleet's head token (" + contract.EnvHeadToken + ", or the run directory's " +
				contract.RunHeadTokenFile + ") as Authorization: Bearer",
		})
		return
	}
	name := a.cfg.Instance
	if name == "" {
		name = serverName()
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, a.episodes.Report(name, time.Now()))
}

// writeJSON writes v as a JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Default().Error("agent: encode an answer", "err", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// liveID is the id an episode is reported under: its rollout id when it
// has the shape upstream requires, else "" (counted, not listed), so that
// a path segment of any other kind never reaches the report.
func liveID(id string) string {
	if !protocol.ValidRolloutID(id) {
		return ""
	}
	return id
}
