package orchestrator

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
)

// HeadTelemetryPath is a route of gymlens's head server that NeMo Gym's
// does not have: the telemetry environment every server of the fleet
// runs with (see TelemetryEnv). `gymlens serve --head` reads it on another
// host so that a server started there joins the run: same run id, same
// exporters, sampler and presets.
const HeadTelemetryPath = HeadGymlensPrefix + "telemetry_env"

// HeadGymlensPrefix starts every route of gymlens's own on the head
// server; each asks for the head token.
const HeadGymlensPrefix = contract.RoutePrefix

// TelemetryEnv is what GET HeadTelemetryPath answers.
type TelemetryEnv struct {
	// RunID is the run's id (NEMO_GYM_OTEL_RUN_ID as the servers get it);
	// empty when telemetry is off.
	RunID string `json:"run_id"`
	// Env holds every telemetry variable (NEMO_GYM_OTEL_*, NEMO_LENS_*,
	// OTEL_*) a server started by this orchestrator inherits, except the
	// ones that name a place on the orchestrator's host (its file in the
	// run directory and its /metrics address), which a server on another
	// host chooses for itself, and the secret ones (Secrets).
	Env map[string]string `json:"env"`
	// Secrets names the telemetry variables set on the head's host whose
	// values are credentials (export headers, keys, tokens, passwords, an
	// endpoint with a user in it). Their values never leave the head: a
	// server on another host must have them set there.
	Secrets []string `json:"secrets,omitempty"`
}

// secretVar reports whether a telemetry variable carries a credential:
// headers (OTEL_EXPORTER_OTLP_HEADERS and the per-signal ones), a name
// lens.IsSensitiveKey takes for a secret's (..._KEY, ..._TOKEN,
// ..._PASSWORD, ...), or a value holding a URL with credentials in it
// (what gymconfig.ScrubURLs would change).
func secretVar(name, value string) bool {
	return strings.HasSuffix(strings.ToUpper(name), "_HEADERS") || lens.IsSensitiveKey(name) ||
		gymconfig.ScrubURLs(value) != value
}

// hostLocal variables name a place on one host; a server on another host
// does not take them from the head.
var hostLocal = []string{lens.KeyFilePath, lens.KeyPrometheusAddr}

// telemetryEnv collects the telemetry environment of the fleet's servers
// from env (os.Environ() followed by Options.ExtraEnv: later wins, as
// for a child).
func telemetryEnv(env []string) TelemetryEnv {
	out := TelemetryEnv{Env: map[string]string{}}
	local := map[string]bool{}
	for _, k := range hostLocal {
		local[lens.PrimaryPrefix+k], local[lens.FallbackPrefix+k] = true, true
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || local[k] {
			continue
		}
		if !strings.HasPrefix(k, lens.PrimaryPrefix) && !strings.HasPrefix(k, lens.FallbackPrefix) && !strings.HasPrefix(k, "OTEL_") {
			continue
		}
		if secretVar(k, v) {
			if !slices.Contains(out.Secrets, k) {
				out.Secrets = append(out.Secrets, k)
			}
			delete(out.Env, k) // an earlier, non-secret value of the same name
			continue
		}
		out.Env[k] = v
	}
	slices.Sort(out.Secrets)
	out.RunID = out.Env[lens.PrimaryPrefix+lens.KeyRunID]
	return out
}

// TelemetryEnv returns the telemetry environment this fleet's servers run
// with, as the head server publishes it.
func (f *Fleet) TelemetryEnv() TelemetryEnv {
	return telemetryEnv(append(os.Environ(), f.opts.ExtraEnv...))
}

// hostIsLocal reports whether a server block's host is this machine:
// empty, a loopback or unspecified address, "localhost", or a name or
// address that is (or resolves to) one of local, the addresses of this
// host's interfaces. A server whose host is not local runs on another
// machine: the fleet does not start it but waits for it to join.
func hostIsLocal(host string, local []net.IP, lookup func(string) ([]string, error)) (bool, error) {
	if host == "" || strings.EqualFold(host, "localhost") {
		return true, nil
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		var err error
		if addrs, err = lookup(host); err != nil {
			return false, fmt.Errorf("host %q: %w", host, err)
		}
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil {
			continue
		}
		if ip.IsLoopback() || ip.IsUnspecified() || slices.ContainsFunc(local, ip.Equal) {
			return true, nil
		}
	}
	return false, nil
}

// interfaceIPs lists the addresses of this host's network interfaces.
func interfaceIPs() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP)
		}
	}
	return out, nil
}

// JoinCommand is the command that starts the named server on its own
// host and joins it to this fleet. It names the head token's file, never
// the token: copy the file there, or set contract.EnvHeadToken.
func (f *Fleet) JoinCommand(name string) string {
	return "gymlens serve --head " + f.HeadURL() + " --name " + name +
		" --head-token-file <a copy of " + filepath.Join(f.opts.RunDir, contract.RunHeadTokenFile) + ">"
}

// joinRemote waits for a server on another host to answer GET / on its
// configured address (within Options.JoinTimeout) and adds it to the
// fleet. Nothing is spawned: the server is started there by
// `gymlens serve --head`, which reads its block from the head server.
func (f *Fleet) joinRemote(ctx context.Context, spec ServerSpec) error {
	c := &child{spec: spec, remote: true, tail: newTailBuffer(1), done: make(chan struct{}), account: make(chan struct{})}
	c.info = ServerInfo{Spec: spec, Started: time.Now(), Remote: true, URL: serverURL(spec)}
	f.mu.Lock()
	f.servers = append(f.servers, c)
	f.mu.Unlock()
	f.log.Info("waiting for a server on another host to join", "server", spec.Name, "url", c.info.URL,
		"timeout", f.opts.JoinTimeout, "start_it_with", f.JoinCommand(spec.Name))
	if err := f.waitAnswer(ctx, c, f.opts.JoinTimeout); err != nil {
		f.forget(c)
		return fmt.Errorf("server %q on another host (%s) did not join: %v; start it there with: %s",
			spec.Name, c.info.URL, err, f.JoinCommand(spec.Name))
	}
	f.mu.Lock()
	c.up = true
	f.mu.Unlock()
	f.log.Info("server joined from another host", "server", spec.Name, "type", spec.Type, "url", c.info.URL)
	return nil
}

// serveTelemetryEnv answers GET HeadTelemetryPath.
func serveTelemetryEnv(f *Fleet) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, f.TelemetryEnv())
	}
}
