package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/orchestrator"
)

// Joining a fleet from another host: `gymlens serve --head URL --name NAME`
// reads the fleet's config dict and telemetry environment from the head
// server, then serves NAME's block exactly as a server the orchestrator
// spawned would, and leaves when the head says the fleet is stopping (or,
// with a head that cannot say so, when it stops answering).

// Head watching: the joined server probes the head's GET / every
// headProbeInterval and shuts down (draining and flushing as on SIGTERM)
// after headProbeFailures failures in a row, so it leaves within
// headProbeFailures × (headProbeInterval + headProbeTimeout) of the run's
// end.
const (
	headProbeInterval = 2 * time.Second
	headProbeTimeout  = 2 * time.Second
	headProbeFailures = 3
)

// defaultHeadWait is how long `gymlens serve --head` waits, by default, for the
// head server to answer: servers on other hosts may be started before the
// orchestrator.
const defaultHeadWait = 2 * time.Minute

// wantsHead reports whether args are the `--head` form of gymlens serve.
func wantsHead(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		for _, p := range []string{"-head", "--head"} {
			if a == p || strings.HasPrefix(a, p+"=") {
				return true
			}
		}
		return false
	})
}

// runJoin is `gymlens serve --head URL --name NAME`.
func runJoin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gymlens serve --head", flag.ContinueOnError)
	head := fs.String("head", "", "base URL of the fleet's head server, http://HOST:PORT (required)")
	name := fs.String("name", "", "the server instance of the fleet config to serve (required)")
	runsDir := fs.String("runs-dir", defaultRunsDir, "where this host keeps runs/<run id>/telemetry/<name>.jsonl when the fleet exports to files")
	wait := fs.Duration("wait", defaultHeadWait, "how long to wait for the head server to answer")
	tokenFile := fs.String("head-token-file", "", "file holding the fleet's head token (a copy of the run directory's "+contract.RunHeadTokenFile+"); default: $"+contract.EnvHeadToken)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gymlens serve --head http://HOST:PORT --name NAME [flags]\n\n"+
			"Joins a running fleet from another host. It reads the fleet's config\n"+
			"dict (%s) and telemetry environment (%s) from the head server,\n"+
			"binds the host:port of NAME's block, and serves it as the orchestrator's\n"+
			"own servers are served: same run id, same exporters and sampler (a\n"+
			"variable set in this process's environment wins, except the run id).\n"+
			"The orchestrator waits for it, probes it and counts it in\n"+
			"gym.servers.active. It leaves, draining and flushing as on SIGTERM, when\n"+
			"the head says the fleet is stopping (%s), then hands the head its\n"+
			"telemetry account; or once the head has not answered for %d probes in a\n"+
			"row (every %s).\n\nFlags:\n",
			orchestrator.HeadConfigPath, orchestrator.HeadTelemetryPath, orchestrator.HeadStoppingPath, headProbeFailures, headProbeInterval)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	base, err := headBase(*head)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: --head: %v\n", err)
		return exitUsage
	}
	if *name == "" {
		fmt.Fprintln(stderr, "gymlens serve: --name is required with --head")
		return exitUsage
	}
	if *wait <= 0 {
		fmt.Fprintf(stderr, "gymlens serve: --wait %s: want a duration above 0\n", *wait)
		return exitUsage
	}
	token, err := headToken(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
		return exitUsage
	}
	if token != "" {
		// This server's own gymlens routes (an agent's episodes) ask for
		// the fleet's token, as those of the servers the orchestrator
		// starts do, which get it in their environment.
		if err := os.Setenv(contract.EnvHeadToken, token); err != nil {
			fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
			return 1
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("server", *name)
	client := &http.Client{Timeout: headProbeTimeout, Transport: &orchestrator.BearerTransport{Token: token}}
	defer client.CloseIdleConnections()
	dict, tel, err := readHead(ctx, client, base, *wait, log)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
		return 1
	}
	for _, name := range tel.Secrets {
		if _, set := os.LookupEnv(name); !set {
			log.Warn("the fleet's telemetry uses a credential the head server does not hand out; set it on this host", "var", name)
		}
	}
	lookup := func(k string) (string, bool) {
		switch k {
		case gymconfig.EnvConfigDict:
			return dict, true
		case gymconfig.EnvConfigPath:
			return *name, true
		}
		return os.LookupEnv(k)
	}
	l, _, err := gymconfig.LaunchFromEnv(lookup)
	if err != nil {
		fmt.Fprintf(stderr, "gymlens serve: the head's config: %v\n", err)
		return exitUsage
	}
	if err := joinTelemetry(tel, *runsDir, *name, log); err != nil {
		fmt.Fprintf(stderr, "gymlens serve: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchHead(ctx, client, base, cancel, log)
	// A second client for the long wait on the head's stopping route,
	// same token.
	poll := &http.Client{Timeout: orchestrator.StoppingPollTimeout, Transport: client.Transport}
	defer poll.CloseIdleConnections()
	var toldToStop atomic.Bool
	go awaitStopping(ctx, poll, base, *name, func() { toldToStop.Store(true); cancel() }, log)
	log.Info("joining the fleet", "head", base, "run_id", tel.RunID, "addr", l.Addr())
	return serveLaunched(ctx, l, stdout, stderr, func(h *lens.Handle) {
		// The head waits for the account only when it told us to stop;
		// otherwise it is gone and the account stays in this host's
		// telemetry file and log.
		if toldToStop.Load() {
			sendAccount(client, base, *name, h.Account(), log)
		}
	})
}

// awaitStopping asks the head server, one long wait after another,
// whether the fleet is stopping, and calls leave when it is. It ends with
// ctx, or at once when the head has no such route (NeMo Gym's head
// server, an older gymlens): watchHead still notices the head going.
func awaitStopping(ctx context.Context, client *http.Client, base, name string, leave func(), log *slog.Logger) {
	u := base + orchestrator.HeadStoppingPath + "?" + url.Values{orchestrator.StoppingServerParam: {name}}.Encode()
	for ctx.Err() == nil {
		var st orchestrator.StoppingStatus
		status, err := getJSON(ctx, client, u, &st)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && status == http.StatusNotFound:
			return
		case err == nil && status == http.StatusOK && st.Stopping:
			log.Info("the fleet is stopping; leaving it", "head", base)
			leave()
			return
		case err == nil && status == http.StatusOK:
			continue
		}
		// The head is restarting, or unreachable for now: ask again
		// shortly (watchHead decides when it is gone).
		select {
		case <-ctx.Done():
		case <-time.After(headProbeInterval):
		}
	}
}

// accountSendTimeout bounds the hand-over of the telemetry account.
const accountSendTimeout = 5 * time.Second

// sendAccount hands this server's telemetry account (lens.Handle.Account,
// nil when telemetry is off) to the head server, which adds it to the
// run directory so that the run's summary covers this server too.
func sendAccount(client *http.Client, base, name string, account []byte, log *slog.Logger) {
	body, err := json.Marshal(orchestrator.RemoteAccount{Server: name, Account: string(account)})
	if err != nil {
		log.Warn("telemetry account not sent", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), accountSendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+orchestrator.HeadAccountPath, bytes.NewReader(body))
	if err != nil {
		log.Warn("telemetry account not sent", "err", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		log.Warn("telemetry account not sent to the head server", "head", base, "err", err)
		return
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusNoContent {
		log.Warn("the head server refused the telemetry account", "head", base, "status", res.StatusCode)
		return
	}
	log.Info("telemetry account handed to the head server", "head", base, "bytes", len(account))
}

// headToken is the head token a command sends to a head server: the
// content of file when one is given, else $GYMLENS_HEAD_TOKEN; "" when
// neither (a head server on loopback answers NeMo Gym's routes without).
func headToken(file string) (string, error) {
	if file == "" {
		return os.Getenv(contract.EnvHeadToken), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--head-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if err := orchestrator.CheckHeadToken(token); err != nil {
		return "", fmt.Errorf("--head-token-file %s: %w", file, err)
	}
	return token, nil
}

// headBase checks a --head value and returns it without a trailing slash.
func headBase(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("required: the head server's base URL, http://HOST:PORT")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: want http://HOST:PORT", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// readHead fetches the config dict (the YAML inside the JSON string the
// head answers) and the telemetry environment, retrying until the head
// answers or wait passes. A head without the telemetry route (NeMo Gym's
// own) gives an empty environment: this process's own settings apply.
func readHead(ctx context.Context, client *http.Client, base string, wait time.Duration, log *slog.Logger) (string, orchestrator.TelemetryEnv, error) {
	var tel orchestrator.TelemetryEnv
	deadline := time.Now().Add(wait)
	var dict string
	for {
		status, err := getJSON(ctx, client, base+orchestrator.HeadConfigPath, &dict)
		if err == nil && status == http.StatusOK {
			break
		}
		if status == http.StatusUnauthorized {
			return "", tel, fmt.Errorf("head server %s: GET %s: 401: it wants the fleet's head token (--head-token-file, or $%s)",
				base, orchestrator.HeadConfigPath, contract.EnvHeadToken)
		}
		if err == nil {
			err = fmt.Errorf("status %d", status)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return "", tel, fmt.Errorf("head server %s: GET %s not answered within %s: %v", base, orchestrator.HeadConfigPath, wait, err)
		}
		log.Info("waiting for the head server", "head", base, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	status, err := getJSON(ctx, client, base+orchestrator.HeadTelemetryPath, &tel)
	switch {
	case err != nil:
		return "", tel, fmt.Errorf("head server %s: %s: %w", base, orchestrator.HeadTelemetryPath, err)
	case status == http.StatusNotFound:
		log.Warn("the head server publishes no telemetry environment (not a gymlens fleet?); using this process's own", "head", base)
	case status != http.StatusOK:
		return "", tel, fmt.Errorf("head server %s: %s: status %d", base, orchestrator.HeadTelemetryPath, status)
	}
	return dict, tel, nil
}

// getJSON GETs url and decodes a 200 answer (at most 16 MiB) into v.
func getJSON(ctx context.Context, client *http.Client, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return res.StatusCode, nil
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 16<<20)).Decode(v); err != nil {
		return res.StatusCode, fmt.Errorf("GET %s: %w", url, err)
	}
	return res.StatusCode, nil
}

// joinTelemetry puts the fleet's telemetry environment into this
// process's: a variable already set here wins (this host's collector
// endpoint, say), except the run id, which is the fleet's. When the
// result exports to files and no file is set, the file is
// runsDir/<run id>/telemetry/<name>.jsonl on this host.
func joinTelemetry(tel orchestrator.TelemetryEnv, runsDir, name string, log *slog.Logger) error {
	runIDVar := lens.PrimaryPrefix + lens.KeyRunID
	for k, v := range tel.Env {
		if own, set := os.LookupEnv(k); set && k != runIDVar {
			if own != v {
				log.Info("a telemetry variable set on this host overrides the fleet's", "var", k)
			}
			continue
		}
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	cfg, err := lens.LoadConfig(lens.LoadOptions{Lookup: os.LookupEnv})
	if err != nil {
		return fmt.Errorf("telemetry settings: %w", err)
	}
	if !cfg.HasExporter(lens.ExporterFile) || cfg.FilePath != "" || tel.RunID == "" {
		return nil
	}
	dir := filepath.Join(runsDir, tel.RunID, contract.RunTelemetryDir)
	if err := os.MkdirAll(dir, contract.RunDirPerm); err != nil {
		return fmt.Errorf("telemetry directory: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(dir, contract.TelemetryFileName(name)))
	if err != nil {
		return err
	}
	return os.Setenv(lens.PrimaryPrefix+lens.KeyFilePath, path)
}

// watchHead probes the head server until ctx ends and calls leave once
// it has failed headProbeFailures probes in a row.
func watchHead(ctx context.Context, client *http.Client, base string, leave func(), log *slog.Logger) {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(headProbeInterval):
		}
		var status map[string]any
		_, err := getJSON(ctx, client, base+"/", &status)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		if failures >= headProbeFailures {
			log.Info("the head server is gone; leaving the fleet", "head", base, "failed_probes", failures, "err", err)
			leave()
			return
		}
	}
}
