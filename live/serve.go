package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// StatusPath is the status API's route, on the head server and on
// `gymlens rollouts collect`'s status listener: GET answers a Snapshot as
// JSON. Like every gymlens route it asks for the head token.
const StatusPath = contract.RoutePrefix + "status"

// PagePath is the live page's route: the same data as StatusPath, drawn
// in a browser (see Page).
const PagePath = contract.RoutePrefix + "live"

// The status API's query parameters, each optional: a State word, one
// rollout by id, and how many rollouts to list (see Filter).
const (
	ParamState     = "state"
	ParamRolloutID = "rollout_id"
	ParamLimit     = "limit"
)

// FilterFromQuery reads a status request's query parameters.
func FilterFromQuery(q url.Values) (Filter, error) {
	f := Filter{State: State(q.Get(ParamState)), RolloutID: q.Get(ParamRolloutID)}
	if s := q.Get(ParamLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return f, fmt.Errorf("live: %s %q: want a count of 0 or more", ParamLimit, s)
		}
		f.Limit = n
	}
	return f, f.Validate()
}

// Query is f as the status API's query parameters.
func (f Filter) Query() url.Values {
	q := url.Values{}
	if f.State != "" {
		q.Set(ParamState, string(f.State))
	}
	if f.RolloutID != "" {
		q.Set(ParamRolloutID, f.RolloutID)
	}
	if f.Limit > 0 {
		q.Set(ParamLimit, strconv.Itoa(f.Limit))
	}
	return q
}

// ErrNoRun is what a Board answers (as 503) while it shows no run.
var ErrNoRun = errors.New("live: no collection is running here yet")

// Board serves the status API of the run it shows: none at first, then
// a Tracker in this process (Show) or another process's status API that
// it relays (Relay), such as that of a `gymlens rollouts collect` pointed
// at this head server. The latest call wins. It is safe for concurrent
// use.
type Board struct {
	cur    atomic.Pointer[boardSource]
	jaeger atomic.Pointer[string]
}

// SetJaegerURL names the Jaeger UI (its base URL) that the run's traces
// are in: the status API's answers carry it as jaeger_url, and the live
// page links each rollout with a trace id to <url>/trace/<id>.
func (b *Board) SetJaegerURL(u string) { b.jaeger.Store(&u) }

// boardAnswer is a Board's answer: the snapshot and the Jaeger UI.
type boardAnswer struct {
	Snapshot
	JaegerURL string `json:"jaeger_url,omitempty"`
}

type boardSource struct {
	tracker *Tracker
	remote  *Client
}

// Show makes the board serve t's snapshots.
func (b *Board) Show(t *Tracker) {
	if t != nil {
		b.cur.Store(&boardSource{tracker: t})
	}
}

// Relay makes the board answer with what c fetches.
func (b *Board) Relay(c *Client) {
	if c != nil {
		b.cur.Store(&boardSource{remote: c})
	}
}

// Snapshot returns the shown run's snapshot, ErrNoRun when there is none.
func (b *Board) Snapshot(ctx context.Context, f Filter) (Snapshot, error) {
	src := b.cur.Load()
	switch {
	case src == nil:
		return Snapshot{}, ErrNoRun
	case src.tracker != nil:
		return src.tracker.Snapshot(f), nil
	}
	return src.remote.Snapshot(ctx, f)
}

// ServeHTTP answers GET StatusPath: the snapshot as JSON, 400 for a
// query that is not a filter, 503 while no run is shown or the relayed
// one does not answer. It does not check the token: mount it behind the
// server's guard.
func (b *Board) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, err := FilterFromQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"detail": err.Error()})
		return
	}
	snap, err := b.Snapshot(r.Context(), f)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": err.Error()})
		return
	}
	answer := boardAnswer{Snapshot: snap}
	if u := b.jaeger.Load(); u != nil {
		answer.JaegerURL = *u
	}
	writeJSON(w, http.StatusOK, answer)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// maxSnapshotBytes bounds a snapshot read from another process. A
// snapshot lists at most MaxLimit rollouts of at most MaxSteps steps and
// a series of at most MaxPoints points: well under this.
const maxSnapshotBytes = 32 << 20

// Client reads a status API: a head server's or a collector's.
type Client struct {
	// Base is the server's base URL, http://HOST:PORT.
	Base string
	// Token is the head token sent as a bearer token; "" sends none.
	Token string
	// HTTP makes the calls; nil means a client with a 10 s timeout.
	HTTP *http.Client
}

// StatusError is a status API's refusal: its HTTP status and what it
// said.
type StatusError struct {
	Status int
	Detail string
}

func (e *StatusError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("status %d: %s", e.Status, e.Detail)
	}
	return fmt.Sprintf("status %d", e.Status)
}

// Raw fetches the snapshot as the server sent it (JSON).
func (c *Client) Raw(ctx context.Context, f Filter) ([]byte, error) {
	u := c.Base + StatusPath
	if q := f.Query().Encode(); q != "" {
		u += "?" + q
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("live: GET %s: %w", StatusPath, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxSnapshotBytes+1))
	if err != nil {
		return nil, fmt.Errorf("live: GET %s: %w", StatusPath, err)
	}
	if len(body) > maxSnapshotBytes {
		return nil, fmt.Errorf("live: GET %s: answer over %d bytes", StatusPath, maxSnapshotBytes)
	}
	if res.StatusCode != http.StatusOK {
		var d struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &d)
		return nil, &StatusError{Status: res.StatusCode, Detail: d.Detail}
	}
	return body, nil
}

// Snapshot fetches and decodes the snapshot.
func (c *Client) Snapshot(ctx context.Context, f Filter) (Snapshot, error) {
	body, err := c.Raw(ctx, f)
	if err != nil {
		return Snapshot{}, err
	}
	var s Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return Snapshot{}, fmt.Errorf("live: GET %s: %w", StatusPath, err)
	}
	return s, nil
}

// Enabled reads contract.EnvLive through lookup: true unless it is set
// to a false word; an unreadable value is an error naming the variable.
func Enabled(lookup func(string) (string, bool)) (bool, error) {
	v, ok := lookup(contract.EnvLive)
	if !ok || strings.TrimSpace(v) == "" {
		return true, nil
	}
	on, ok := contract.BoolWord(v)
	if !ok {
		return false, fmt.Errorf("%s=%q: not a boolean (use 1/true/yes/on or 0/false/no/off)", contract.EnvLive, v)
	}
	return on, nil
}
