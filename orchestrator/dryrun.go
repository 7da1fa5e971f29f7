package orchestrator

// The dry run: each server of a config that sets dry_run: true runs once,
// one at a time, and must exit 0 without serving.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gymlens/gymlens/gymconfig"
)

// DryRun reports whether the config dict sets dry_run: true. Such a fleet
// is checked with DryRun; Start refuses it.
func (c Config) DryRun() bool { return c.resolved != nil && c.resolved.DryRun() }

// DryRunResult is how one server fared under DryRun.
type DryRunResult struct {
	// Server describes the process that ran: spec (host and port filled
	// in), PID, command and directory. URL is where it would have served.
	Server ServerInfo
	// Elapsed is how long the process ran.
	Elapsed time.Duration
	// Err is nil when the server exited 0 without listening; otherwise it
	// names the server, says what went wrong and quotes its last stderr
	// lines.
	Err error
}

// DryRun checks a fleet whose config sets dry_run: true the way NeMo
// Gym's `env start` does: it fills the dict's defaults and serves the
// head API as Start would, then runs every server (built-in and
// command:) under the launch contract, one at a time in document order.
// Each must exit 0 within HealthTimeout without listening. A server that
// exits non-zero fails; one still running at the timeout, or one that
// answers GET / on its address (it ignored dry_run and serves), is
// SIGKILLed with its process group and fails. Every server runs even
// after a failure, so one DryRun reports them all. There is no readiness
// polling and gym.servers.active is not recorded: nothing is left
// running when DryRun returns.
//
// The results cover every server that was run, in order; the error joins
// their failures (nil when all passed), or says why nothing ran. When ctx
// ends the running server is killed and DryRun returns with ctx's error.
// DryRun refuses a config without dry_run: true.
func DryRun(ctx context.Context, cfg Config, opts Options) ([]DryRunResult, error) {
	if cfg.Dict != nil && !cfg.DryRun() {
		return nil, fmt.Errorf("orchestrator: the config does not set %s: true; its servers would serve, so use Start", gymconfig.KeyDryRun)
	}
	f, err := newFleet(cfg, opts)
	if err != nil {
		return nil, err
	}
	defer f.closeHead()
	specs, err := f.filledSpecs(cfg.Servers)
	if err != nil {
		return nil, err
	}
	f.log.Info("dry run: servers run one at a time and must exit 0 without listening", "servers", len(specs), "head_server", f.HeadURL())
	var results []DryRunResult
	var errs []error
	for _, spec := range specs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("dry run: %w", err))
			break
		}
		res := f.dryRunOne(ctx, spec)
		results = append(results, res)
		if res.Err != nil {
			errs = append(errs, res.Err)
			// The error, stderr lines and all, is the caller's to show.
			f.log.Error("dry run: server failed", "server", spec.Name, "type", spec.Type, "impl", spec.Impl, "pid", res.Server.PID)
			continue
		}
		f.log.Info("dry run: server validated", "server", spec.Name, "type", spec.Type, "impl", spec.Impl, "pid", res.Server.PID, "elapsed", res.Elapsed.Round(time.Millisecond))
	}
	return results, errors.Join(errs...)
}

// dryRunOne runs one server under dry_run and waits for it to exit.
func (f *Fleet) dryRunOne(ctx context.Context, spec ServerSpec) DryRunResult {
	c, err := f.spawn(spec)
	if err != nil {
		return DryRunResult{Server: ServerInfo{Spec: spec}, Err: fmt.Errorf("dry run: %w", err)}
	}
	err = f.waitExit(ctx, c)
	res := DryRunResult{Server: c.info, Elapsed: time.Since(c.info.Started)}
	if err != nil {
		lines := c.tail.Lines()
		msg := fmt.Sprintf("server %q failed the dry run: %v", spec.Name, err)
		if len(lines) > 0 {
			msg += "\n  last stderr lines:\n    " + strings.Join(lines, "\n    ")
		}
		res.Err = errors.New(msg)
	}
	return res
}

// waitExit waits for a dry-run child to exit 0. It kills the child's
// process group when HealthTimeout passes, ctx ends or the child answers
// GET / on its address, and returns what went wrong.
func (f *Fleet) waitExit(ctx context.Context, c *child) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	timeout := time.NewTimer(f.opts.HealthTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			if c.waitErr != nil {
				return fmt.Errorf("exited with %v (dry_run wants exit status 0)", c.waitErr)
			}
			return nil
		case <-timeout.C:
			f.kill(c)
			return fmt.Errorf("still running after %s (dry_run wants it to exit): killed", f.opts.HealthTimeout)
		case <-ctx.Done():
			f.kill(c)
			return ctx.Err()
		case <-tick.C:
			if answers(ctx, client, c.info.URL) {
				f.kill(c)
				return fmt.Errorf("serves on %s instead of exiting (it ignores dry_run): killed", c.info.URL)
			}
		}
	}
}

// answers reports whether GET url/ gets any HTTP answer.
func answers(ctx context.Context, client *http.Client, url string) bool {
	return probe(ctx, client, url) == nil
}

// closeHead stops the head server of a dry run.
func (f *Fleet) closeHead() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.head.close(ctx); err != nil {
		f.log.Warn("dry run: head server", "err", err)
	}
}
