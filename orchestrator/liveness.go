package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// startWatchers starts one liveness watcher per running server, unless
// Options.LivenessInterval turned probing off. Stop ends them.
func (f *Fleet) startWatchers() {
	if f.opts.LivenessInterval < 0 {
		return
	}
	// A client of its own: keep-alive connections to every server, none
	// shared with anything else the process does.
	f.probe = &http.Client{
		Timeout: f.opts.LivenessTimeout,
		Transport: &http.Transport{
			Proxy:               nil, // fleet peers are addressed directly
			DialContext:         (&net.Dialer{Timeout: f.opts.LivenessTimeout}).DialContext,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     time.Minute,
		},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.servers {
		if c.counted {
			f.watchers.Go(func() { f.watch(c) })
		}
	}
}

// watch probes c's GET / every LivenessInterval until c ends or the fleet
// stops. Any HTTP answer is alive, as for readiness; a refused connection,
// a timeout or a reset is a failure. Once c's probes have gone unanswered
// for its budget (ServerSpec.LivenessBudget, else Options.LivenessBudget),
// counted from the sending of the first unanswered one, or
// LivenessFailures probes in a row found the connection refused, the
// server is taken for dead (stopped, deadlocked, wedged, gone): it is
// killed with its process group, and its reaper reports it on Exits with
// an error wrapping ErrUnresponsive. A server that exits is its reaper's
// to report, not the watcher's.
func (f *Fleet) watch(c *child) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.quit:
		case <-c.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	every, limit := f.opts.LivenessInterval, f.opts.LivenessFailures
	budget := c.spec.LivenessBudget
	if budget <= 0 {
		budget = f.opts.LivenessBudget
	}
	t := time.NewTimer(every)
	defer t.Stop()
	failures, refused := 0, 0
	var first time.Time // when the first unanswered probe was sent
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		err := probe(ctx, f.probe, c.info.URL)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if failures > 0 {
				f.log.Info("server answers its liveness probe again", "server", c.spec.Name, "pid", c.info.PID,
					"failed_probes", failures, "unanswered_for", time.Since(first).Round(time.Millisecond))
			}
			failures, refused = 0, 0
			t.Reset(every)
			continue
		}
		if failures == 0 {
			first = sent
		}
		failures++
		if errors.Is(err, syscall.ECONNREFUSED) {
			refused++
		} else {
			refused = 0
		}
		silent := time.Since(first)
		if silent < budget && refused < limit {
			f.log.Warn("server did not answer its liveness probe", "server", c.spec.Name, "pid", c.info.PID,
				"failed_probes", failures, "unanswered_for", silent.Round(time.Millisecond), "budget", budget, "err", err)
			t.Reset(every)
			continue
		}
		f.mu.Lock()
		if f.stopping {
			f.mu.Unlock()
			return
		}
		verdict := "killed"
		if c.remote {
			verdict = "dropped from the fleet (it runs on another host)"
		}
		why := fmt.Sprintf("unanswered for %s, over its %s budget", silent.Round(time.Millisecond), budget)
		if refused >= limit {
			why = fmt.Sprintf("%d in a row found the connection refused", refused)
		}
		c.hung = fmt.Errorf("%w: %d liveness probes in a row failed, %s (every %s, each with a %s timeout; last: %v): %s",
			ErrUnresponsive, failures, why, every, f.opts.LivenessTimeout, err, verdict)
		f.mu.Unlock()
		if c.remote {
			f.ended(c, nil)
			return
		}
		f.log.Error("server stopped answering; killing it", "server", c.spec.Name, "pid", c.info.PID, "failed_probes", failures, "err", err)
		// SIGKILL ends a stopped (SIGSTOP) process too; the reaper reports
		// the exit.
		c.signal(syscall.SIGKILL)
		return
	}
}

// probe sends GET url/ and reports why no HTTP answer came, or nil.
func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	// Read a bounded rest, so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	return nil
}
