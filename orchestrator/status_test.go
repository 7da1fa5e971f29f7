package orchestrator_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/orchestrator"
)

// The head's status API: nothing until a run is shown, then the run
// `gymlens run` shows on the board, or the collector that named its own
// status API (`gymlens rollouts collect --head`), relayed with the head
// token; the live page is served to anyone, its data only with the token.
func TestHeadStatus(t *testing.T) {
	testenv.ClearTelemetry(t)
	const token = "status-head-token-0c4e2b9a"
	f := startFleet(t, stubFleet(t, "", "a"), orchestrator.Options{HeadToken: token, ExtraEnv: []string{stubEnv + "=plain"}})
	head := f.HeadURL()
	right := "Bearer " + token

	if code, body := headGet(t, head+live.StatusPath, right); code != http.StatusServiceUnavailable || !strings.Contains(body, "no collection") {
		t.Errorf("GET %s before any run: %d %s, want 503", live.StatusPath, code, body)
	}
	if code, body := headGet(t, head+live.PagePath, ""); code != http.StatusOK || !strings.Contains(body, "<title>gymlens live</title>") {
		t.Errorf("GET %s without a token: %d %.200s, want the page", live.PagePath, code, body)
	}

	// A run shown by this process.
	tr, err := live.NewTracker(live.DefaultRules(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tr.SetRunID("in-process")
	tr.Queue("simple_agent", 2)
	tr.Start(live.Identity{TaskIndex: 0, RolloutID: "0-0", Agent: "simple_agent"})
	f.Board().Show(tr)
	f.Board().SetJaegerURL("http://jaeger.example:16686")
	code, body := headGet(t, head+live.StatusPath+"?state=active", right)
	var snap struct {
		live.Snapshot
		JaegerURL string `json:"jaeger_url"`
	}
	if err := json.Unmarshal([]byte(body), &snap); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %s (%v)", live.StatusPath, code, body, err)
	}
	if snap.RunID != "in-process" || len(snap.Rollouts) != 1 || snap.Rollouts[0].RolloutID != "0-0" || snap.JaegerURL != "http://jaeger.example:16686" {
		t.Errorf("GET %s: %s", live.StatusPath, body)
	}
	if code, _ := headGet(t, head+live.StatusPath+"?state=sleeping", right); code != http.StatusBadRequest {
		t.Errorf("a state that is not one: %d, want 400", code)
	}

	// A collector names its own status API; the head relays it, sending
	// the head token, which the collector's wants.
	other, err := live.NewTracker(live.DefaultRules(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	other.SetRunID("collector-run")
	board := &live.Board{}
	board.Show(other)
	var sawToken bool
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != right {
			http.Error(w, `{"detail": "token"}`, http.StatusUnauthorized)
			return
		}
		sawToken = true
		board.ServeHTTP(w, r)
	}))
	defer collector.Close()
	post := func(body, auth string) int {
		req, _ := http.NewRequest(http.MethodPost, head+orchestrator.HeadStatusSourcePath, bytes.NewBufferString(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		body, auth string
		want       int
	}{
		{`{"url": "` + collector.URL + `"}`, "", http.StatusUnauthorized},
		{`{"url": "ftp://x"}`, right, http.StatusBadRequest},
		{`{"url": "http://u:p@127.0.0.1:1"}`, right, http.StatusBadRequest},
		{`{"url": "http://127.0.0.1:1/path"}`, right, http.StatusBadRequest},
		{`not json`, right, http.StatusBadRequest},
	} {
		if got := post(c.body, c.auth); got != c.want {
			t.Errorf("POST %s %s: %d, want %d", orchestrator.HeadStatusSourcePath, c.body, got, c.want)
		}
	}
	if code, body := headGet(t, head+live.StatusPath, right); !strings.Contains(body, "in-process") {
		t.Errorf("a refused source replaced the run shown: %d %s", code, body)
	}
	if got := post(`{"url": "`+collector.URL+`"}`, right); got != http.StatusNoContent {
		t.Fatalf("POST %s: %d, want 204", orchestrator.HeadStatusSourcePath, got)
	}
	code, body = headGet(t, head+live.StatusPath, right)
	if code != http.StatusOK || !strings.Contains(body, `"run_id":"collector-run"`) || !sawToken {
		t.Errorf("relayed status: %d %s (token sent: %v)", code, body, sawToken)
	}
	collector.Close()
	if code, _ := headGet(t, head+live.StatusPath, right); code != http.StatusServiceUnavailable {
		t.Errorf("a relayed collector that is gone: %d, want 503", code)
	}
}
