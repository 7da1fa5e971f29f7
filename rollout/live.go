package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/protocol"
)

// DefaultLiveEvery is how often a run with Options.Live asks each agent
// for its episodes (Options.LiveEvery 0).
const DefaultLiveEvery = time.Second

// maxEpisodesBytes bounds an agent's EpisodesReport: MaxEpisodes episodes
// of MaxSteps steps each fit several times over.
const maxEpisodesBytes = 32 << 20

// liveQueue puts the rollouts of todo on the tracker's queue, by agent,
// and counts the skipped ones.
func liveQueue(tr *live.Tracker, todo []pending, skipped int) {
	byAgent := map[string]int{}
	for _, job := range todo {
		byAgent[job.target.agent]++
	}
	for agent, n := range byAgent {
		tr.Queue(agent, n)
	}
	tr.Skip(skipped)
}

// liveAttempt tells the tracker that attempt index of job's rollout, row
// (the row as sent, its _ng_attempt_index set), starts under id: the
// rollout's start for its first attempt (h nil), another attempt after.
func (c *collector) liveAttempt(h *live.Handle, job pending, row protocol.RunRequest, id string) *live.Handle {
	attempt := 0
	if row.AttemptIndex != nil {
		attempt = *row.AttemptIndex
	}
	if h != nil {
		h.Attempt(attempt, id)
		return h
	}
	return c.live.Start(live.Identity{TaskIndex: *row.TaskIndex, Repeat: *row.RolloutIndex, Attempt: attempt,
		RolloutID: id, Agent: job.target.agent, EnvironmentServer: job.target.server})
}

// liveOutcome is the state of a rollout whose /run answered result: Failed
// when the answer carries a _ng_failure_class (it goes to the failures
// file), else Done; and the class the tracker shows for it (the member's
// name, never its value, which is the agent's text).
func liveOutcome(result protocol.Fields) (live.State, string) {
	if class, ok := result.Get(protocol.KeyFailureClass); ok && !isNull(class) {
		return live.Failed, protocol.KeyFailureClass
	}
	return live.Done, ""
}

// pollTarget is an agent a run's live poller asks for its episodes.
type pollTarget struct {
	agent string
	url   string // its EpisodesPath URL
}

// pollTargets are the agents of a run's targets, each once, at the base
// URL Options.Agents gives it, else at its target's own (an environment
// server, which answers EpisodesPath only if it is gymlens's).
func pollTargets(r *router, targets []*target) []pollTarget {
	seen := map[string]bool{}
	var out []pollTarget
	for _, t := range targets {
		if seen[t.agent] {
			continue
		}
		seen[t.agent] = true
		base := strings.TrimSuffix(t.run, protocol.PathRun)
		if u, ok := r.agents[t.agent]; ok {
			base = u.String()
		}
		out = append(out, pollTarget{agent: t.agent, url: strings.TrimRight(base, "/") + live.EpisodesPath})
	}
	slices.SortFunc(out, func(a, b pollTarget) int { return strings.Compare(a.agent, b.agent) })
	return out
}

// livePoller asks the agents of a run for their episodes while it lasts
// and feeds them to the tracker, one goroutine per agent.
type livePoller struct {
	tracker *live.Tracker
	client  *http.Client
	own     bool // client is the poller's, closed when it stops
	every   time.Duration
	clock   clock
	log     *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startLivePoll starts polling targets every every (0: DefaultLiveEvery)
// with client (nil: a client of its own) until the returned poller's
// stop.
func startLivePoll(ctx context.Context, tr *live.Tracker, client *http.Client, every time.Duration,
	targets []pollTarget, clk clock, log *slog.Logger) *livePoller {
	if every <= 0 {
		every = DefaultLiveEvery
	}
	p := &livePoller{tracker: tr, client: client, every: every, clock: clk, log: log}
	if p.client == nil {
		// Fleet peers are addressed directly, as server.NewClient does.
		p.client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
		p.own = true
	}
	ctx, p.cancel = context.WithCancel(ctx)
	for _, t := range targets {
		p.wg.Go(func() { p.loop(ctx, t) })
	}
	return p
}

// stop ends the polling and waits for it: no goroutine is left.
func (p *livePoller) stop() {
	p.cancel()
	p.wg.Wait()
	if p.own {
		p.client.CloseIdleConnections()
	}
}

// loop polls one agent until ctx ends or the agent is found not to
// answer EpisodesPath to this poller (a 404, a 401 or 403).
func (p *livePoller) loop(ctx context.Context, t pollTarget) {
	tick, stopTick := p.clock.ticker(p.every)
	defer stopTick()
	warned := false
	for {
		err := p.poll(ctx, t)
		switch {
		case err == errNotReporting:
			p.log.Debug("live: agent does not report its episodes; its rollouts show the collector's view only",
				"agent", t.agent, "url", t.url)
			return
		case err == errUnauthorized:
			p.log.Warn("live: agent wants the fleet's head token for its episodes; its rollouts show the collector's view only",
				"agent", t.agent, "url", t.url)
			return
		case err != nil && ctx.Err() == nil && !warned:
			// Once: an agent that is down says so through its rollouts.
			p.log.Warn("live: agent's episodes unavailable", "agent", t.agent, "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// errNotReporting is poll's error for an agent that has no EpisodesPath
// (a 404: an agent that is not gymlens's).
var errNotReporting = fmt.Errorf("no %s route", live.EpisodesPath)

// errUnauthorized is poll's error for an agent that refused the call (a
// 401 or 403: the fleet has a head token and the poller's client does not
// send it), which no later call would change.
var errUnauthorized = fmt.Errorf("%s refused: the head token is missing or wrong", live.EpisodesPath)

// poll asks one agent for its episodes once, within the poll interval
// (at least a second), and feeds the answer to the tracker.
func (p *livePoller) poll(ctx context.Context, t pollTarget) error {
	ctx, cancel := context.WithTimeout(ctx, max(p.every, time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", t.url, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", t.url, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return errNotReporting
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return errUnauthorized
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s answered %s", t.url, resp.Status)
	}
	var rep live.EpisodesReport
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxEpisodesBytes)).Decode(&rep); err != nil {
		return fmt.Errorf("GET %s: decoding the answer: %w", t.url, err)
	}
	p.tracker.Observe(t.agent, rep)
	return nil
}
