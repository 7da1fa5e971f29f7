package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/orchestrator"
	"github.com/gymlens/gymlens/server"
)

// liveFlags are the flags of the live view's rules, shared by every
// command that collects rollouts (gymlens run, gymlens rollouts collect).
type liveFlags struct {
	rules  live.Rules
	jaeger string
}

// addLiveFlags registers the rules' flags on fs, their defaults
// live.DefaultRules.
func addLiveFlags(fs *flag.FlagSet) *liveFlags {
	l := &liveFlags{rules: live.DefaultRules()}
	fs.Float64Var(&l.rules.SlowFactor, "slow-factor", l.rules.SlowFactor, "live view: a rollout is slow once its stage has lasted this many times the stage's recent p95 (and --slow-floor)")
	fs.Float64Var(&l.rules.StallFactor, "stall-factor", l.rules.StallFactor, "live view: a rollout is stalled after no progress for this many times its stage's recent p95 (and --stall-floor)")
	fs.DurationVar(&l.rules.SlowFloor, "slow-floor", l.rules.SlowFloor, "live view: the least a stage lasts before its rollout counts as slow")
	fs.DurationVar(&l.rules.StallFloor, "stall-floor", l.rules.StallFloor, "live view: the least time without progress before a rollout counts as stalled")
	fs.StringVar(&l.jaeger, "jaeger-url", "", "live view: base URL of the Jaeger UI holding the run's traces (http://HOST:16686): the live page links each rollout to its trace there")
	return l
}

// show puts t on b, with the Jaeger UI of the flags.
func (l *liveFlags) show(b *live.Board, t *live.Tracker) {
	if t == nil {
		return
	}
	if l.jaeger != "" {
		b.SetJaegerURL(l.jaeger)
	}
	b.Show(t)
}

// tracker returns a tracker with the flags' rules, or the usage error
// that names the bad flag.
func (l *liveFlags) tracker() (*live.Tracker, error) {
	on, err := live.Enabled(os.LookupEnv)
	if err != nil || !on {
		return nil, err
	}
	if err := l.rules.Validate(); err != nil {
		return nil, fmt.Errorf("--slow-factor/--stall-factor/--slow-floor/--stall-floor: %w", err)
	}
	if l.jaeger != "" {
		if _, err := headBase(l.jaeger); err != nil {
			return nil, fmt.Errorf("--jaeger-url: %w", err)
		}
	}
	return live.NewTracker(l.rules, time.Now)
}

// liveClient is the client a collection asks its agents' episodes with:
// it carries the fleet's head token, which gymlens servers want on their
// /gymlens/ routes.
func liveClient(token string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &orchestrator.BearerTransport{Token: token}}
}

// printLiveWhere tells the user where the run can be watched.
func printLiveWhere(w io.Writer, base, tokenFile string) {
	fmt.Fprintf(w, "watch it: gymlens top --head %s --head-token-file %s   (or %s%s in a browser, with that token)\n",
		base, tokenFile, base, live.PagePath)
}

// statusListener serves a collection's status API (live.StatusPath) on
// its own address: `gymlens rollouts collect` has no head server of its
// own. With a token every request must carry it; without one the address
// must be loopback (the snapshot holds no secret, but nothing of gymlens's
// answers strangers).
type statusListener struct {
	base string
	srv  *http.Server
	done chan struct{}
}

// listenStatus serves board on addr. An address that cannot be used, or
// one off loopback without a token, is the caller's usage error.
func listenStatus(addr, token string, board *live.Board) (*statusListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--status-addr %s: %w", addr, err)
	}
	tcp, _ := ln.Addr().(*net.TCPAddr)
	if token == "" && (tcp == nil || !tcp.IP.IsLoopback()) {
		ln.Close()
		return nil, fmt.Errorf("--status-addr %s: off loopback the status API needs the fleet's head token (--head with --head-token-file, or $%s)", addr, contract.EnvHeadToken)
	}
	check := server.NewBearerToken(token)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+live.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !check.Authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gymlens status"`)
			http.Error(w, `{"detail": "this status API wants the fleet's head token as Authorization: Bearer"}`, http.StatusUnauthorized)
			return
		}
		board.ServeHTTP(w, r)
	})
	mux.Handle("GET "+live.PagePath, live.Page())
	s := &statusListener{
		base: "http://" + ln.Addr().String(),
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// close stops the listener, waiting a moment for requests in flight.
func (s *statusListener) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// offerStatus names a collector's status API to the fleet's head server,
// which then relays it on its own status route. A head that cannot take
// it (NeMo Gym's, an older gymlens) is only logged: the collector's own
// listener still serves.
func offerStatus(ctx context.Context, headURL, token, base string, stderr io.Writer) {
	body, _ := json.Marshal(orchestrator.StatusSource{URL: base})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(headURL, "/")+orchestrator.HeadStatusSourcePath, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Transport: &orchestrator.BearerTransport{Token: token}}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens rollouts collect: the head server does not relay this run's status API: %v\n", err)
		return
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		fmt.Fprintf(stderr, "gymlens rollouts collect: the head server does not relay this run's status API (status %d)\n", res.StatusCode)
	}
}

// writeStatus writes t's snapshot (the rollouts in flight listed, if any)
// to path: the run's last status, as the status API would have answered
// it.
func writeStatus(path string, t *live.Tracker) error {
	if t == nil {
		return nil
	}
	b, err := json.MarshalIndent(t.Snapshot(live.Filter{}), "", "  ")
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), contract.RunFilePerm); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}
