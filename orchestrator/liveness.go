package orchestrator

import (
	"context"
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
// a timeout or a reset is a failure. After LivenessFailures failures in a
// row the server is taken for hung (stopped, deadlocked, wedged): it is
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
	t := time.NewTimer(every)
	defer t.Stop()
	failures := 0
	var first time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := probe(ctx, f.probe, c.info.URL)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if failures > 0 {
				f.log.Info("server answers its liveness probe again", "server", c.spec.Name, "pid", c.info.PID, "failed_probes", failures)
			}
			failures = 0
			t.Reset(every)
			continue
		}
		if failures == 0 {
			first = time.Now()
		}
		failures++
		if failures < limit {
			f.log.Warn("server did not answer its liveness probe", "server", c.spec.Name, "pid", c.info.PID,
				"failed_probes", failures, "limit", limit, "err", err)
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
		c.hung = fmt.Errorf("%w: %d liveness probes in a row failed over %s (every %s, each with a %s timeout; last: %v): %s",
			ErrUnresponsive, failures, time.Since(first).Round(time.Millisecond), every, f.opts.LivenessTimeout, err, verdict)
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
