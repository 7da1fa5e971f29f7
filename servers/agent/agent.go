package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/live"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
)

// ServerName is the implementation's name in a fleet configuration
// (responses_api_agents: simple_agent).
const ServerName = "simple_agent"

// Routes the agent serves, besides the runtime's liveness routes.
const (
	RouteRun              = "POST " + protocol.PathRun
	RouteResponses        = "POST " + protocol.PathResponses
	RouteRolloutResponses = "POST " + protocol.RolloutPrefix + "{rollout_id}" + protocol.PathResponses
	RouteCaptureResponses = "POST " + protocol.RolloutPrefix + "{rollout_id}" + protocol.TokenCaptureSegment + protocol.PathResponses
	RouteAggregateMetrics = "POST " + protocol.PathAggregateMetrics
	// RouteEpisodes is gymlens's own: the episodes in flight and the
	// stages' last minute (live.EpisodesReport).
	RouteEpisodes = "GET " + live.EpisodesPath
)

// KeyVerificationSkipped is the member a result answered without
// verification (Config.SkipVerification) carries, set to true.
const KeyVerificationSkipped = "verification_skipped"

// Config configures the simple agent. Its keys are upstream's
// SimpleAgentConfig keys, except that the two peers are given as base URLs
// (resolved by whoever starts the agent from the fleet configuration's
// resources_server and model_server references) and that Model is
// gymlens's own.
type Config struct {
	// ModelURL is the model server's base URL, such as
	// "http://127.0.0.1:8001"; episodes POST to ModelURL + /v1/responses.
	ModelURL string `json:"model_url" yaml:"model_url"`
	// ResourcesURL is the resources server's base URL: /seed_session,
	// /verify, /aggregate_metrics and one route per tool.
	ResourcesURL string `json:"resources_url" yaml:"resources_url"`
	// MaxSteps bounds the model calls of an episode, tested after a
	// turn's function calls ran (a turn without any ends the episode
	// anyway); nil (and 0, which upstream also treats as unset) leaves an
	// episode unbounded, so a model that calls a tool on every turn loops
	// forever.
	MaxSteps *int `json:"max_steps" yaml:"max_steps"`
	// ExecuteTools is upstream's execute_tools: nil or true executes the
	// model's function calls. Upstream supports false only for agent
	// sessions, which this agent does not serve: with false, /run and
	// /v1/responses answer 500 with upstream's messages, as upstream's
	// do outside a session.
	ExecuteTools *bool `json:"execute_tools" yaml:"execute_tools"`
	// SkipVerification answers /run without calling /verify: the row,
	// the episode as "response", reward SkipVerificationReward and
	// "verification_skipped": true. /aggregate_metrics is then answered
	// locally with empty metrics.
	SkipVerification bool `json:"skip_verification" yaml:"skip_verification"`
	// SkipVerificationReward is the reward of a skipped verification.
	SkipVerificationReward float64 `json:"skip_verification_reward" yaml:"skip_verification_reward"`
	// Model, when set, replaces the model of every episode's parameters
	// (responses_create_params.model) on the calls to the model server.
	// Upstream has no such key; "" sends the row's model, or none.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`

	// ObservabilityEnabled is the fleet configuration's top-level
	// observability_enabled (not a key of the agent's block): with it, a
	// rollout's calls carry the rollout-id path prefix (see the package
	// documentation). Whoever starts the agent sets it.
	ObservabilityEnabled bool `json:"-" yaml:"-"`
	// ModelServerName and ResourcesServerName are the instance names of
	// the two peers (the targets of the block's model_server and
	// resources_server references), which the agent's metrics name;
	// whoever starts the agent sets them. "" names a peer by its URL's
	// host and port.
	ModelServerName     string `json:"-" yaml:"-"`
	ResourcesServerName string `json:"-" yaml:"-"`
	// Instance is the agent's own server name in the fleet config, which
	// its episodes report (live.EpisodesReport.Server) names; whoever
	// starts the agent sets it. "" names the agent as its telemetry
	// resource does, else ServerName.
	Instance string `json:"-" yaml:"-"`
	// HeadToken is the fleet's head token (contract.EnvHeadToken, which
	// the orchestrator hands every server it starts): with one, the
	// episodes route (live.EpisodesPath) answers only a request that
	// carries it as "Authorization: Bearer <token>"; "" leaves the route
	// open. Whoever starts the agent sets it.
	HeadToken string `json:"-" yaml:"-"`
	// NoLive turns the episode registry off (contract.EnvLive): no
	// episode is recorded and the episodes route is not served (404).
	NoLive bool `json:"-" yaml:"-"`
}

// Defaults returns the default configuration: upstream's defaults
// (unbounded steps, verification on, skip reward 0). The two URLs have no
// sensible default and must be set before Validate passes.
func Defaults() Config { return Config{} }

// Validate reports a configuration the agent cannot run with: both URLs
// must be absolute http or https URLs.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ key, val string }{{"model_url", c.ModelURL}, {"resources_url", c.ResourcesURL}} {
		if f.val == "" {
			errs = append(errs, fmt.Errorf("agent: %s is required", f.key))
			continue
		}
		u, err := url.Parse(f.val)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("agent: %s must be an absolute http or https URL", f.key))
		}
	}
	return errors.Join(errs...)
}

// bounded reports whether an episode that has made step model calls must
// stop, as upstream tests it (an unset or zero max_steps never stops it).
func (c Config) bounded(step int) bool {
	return c.MaxSteps != nil && *c.MaxSteps != 0 && step >= *c.MaxSteps
}

// executesTools reports whether episodes execute function calls
// (ExecuteTools unset or true).
func (c Config) executesTools() bool { return c.ExecuteTools == nil || *c.ExecuteTools }

// ServerOptions returns the server options the agent needs for the
// instance: its session cookie, simple_agent___<instance>. Build the
// server Register is given from these options (adding name, address and
// limits).
func ServerOptions(instance string) server.Options {
	return server.Options{SessionCookie: contract.SessionCookieName(ServerName, instance), Reroute: routeDecoded}
}

// routeDecoded routes a request as upstream's Starlette router does
// (nemo_gym 0.7.0 base_responses_api_agent.py:238-263): on the decoded path,
// each route a regular expression ending in Python's "$", which also
// matches before one newline ending the path, and the rollout id of the
// two /ng-rollout/ forms (:242-243) one or more characters other than a
// slash. The mux matches escaped segments and redirects a path it cleans,
// so the request it gets is rewritten to match there exactly when
// upstream's routes match: the decoded path, the id's segment escaped byte
// by byte (an id may be "." or ".." or hold a newline); any other path
// under the prefix, and any path the mux would clean ("//", "." and ".."
// segments, which no literal route of upstream's matches), is upstream's
// 404. Starlette's redirect of a path differing from a route by a
// trailing slash is not followed: such a path is a 404 here.
func routeDecoded(r *http.Request) (*http.Request, bool) {
	p := strings.TrimSuffix(r.URL.Path, "\n")
	raw := ""
	if rest, ok := strings.CutPrefix(p, protocol.RolloutPrefix); ok {
		id, tail, _ := strings.Cut(rest, "/")
		tail = "/" + tail
		if id == "" || tail != protocol.PathResponses && tail != protocol.TokenCaptureSegment+protocol.PathResponses {
			return r, false
		}
		if protocol.ValidRolloutID(id) && p == r.URL.Path && r.URL.RawPath == "" {
			return r, true // the mux reads such an id as it is: nothing to rewrite
		}
		const hex = "0123456789ABCDEF"
		var b strings.Builder
		b.WriteString(protocol.RolloutPrefix)
		for i := 0; i < len(id); i++ {
			b.WriteByte('%')
			b.WriteByte(hex[id[i]>>4])
			b.WriteByte(hex[id[i]&15])
		}
		b.WriteString(tail)
		raw = b.String()
	} else if !muxClean(p) {
		return r, false
	}
	if p == r.URL.Path && raw == r.URL.RawPath {
		return r, true
	}
	u := *r.URL
	u.Path, u.RawPath = p, raw
	r2 := r.WithContext(r.Context())
	r2.URL = &u
	return r2, true
}

// muxClean says whether http.ServeMux leaves path p as it is, where it
// redirects any other path to its cleaned form: p rooted, without empty,
// "." or ".." segments, a trailing slash kept.
func muxClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// Register validates cfg and registers the agent's routes on s: POST
// /run, POST /v1/responses and its two /ng-rollout/ twins, POST
// /aggregate_metrics, and GET live.EpisodesPath, the episodes in flight
// (see serveEpisodes). s should be built from ServerOptions. client makes
// the calls to the model and resources servers; it must not be nil.
func Register(s *server.Server, cfg Config, client *server.Client) error {
	if s == nil || client == nil {
		return errors.New("agent: Register needs a server and a client")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	model, _ := url.Parse(cfg.ModelURL)
	resources, _ := url.Parse(cfg.ResourcesURL)
	if cfg.ModelServerName == "" {
		cfg.ModelServerName = model.Host
	}
	if cfg.ResourcesServerName == "" {
		cfg.ResourcesServerName = resources.Host
	}
	port, _ := strconv.Atoi(model.Port())
	a := &agent{
		cfg:           cfg,
		client:        client,
		model:         model,
		modelHost:     model.Hostname(),
		modelPort:     port,
		resources:     resources,
		modelRoot:     joinRoot(model),
		resourcesRoot: joinRoot(resources),
		modelURL:      endpoint(model, protocol.PathResponses),
		seedURL:       endpoint(resources, protocol.PathSeedSession),
		verifyURL:     endpoint(resources, protocol.PathVerify),
		aggregateURL:  endpoint(resources, protocol.PathAggregateMetrics),
	}
	if !cfg.NoLive {
		a.episodes = &live.Episodes{}
	}
	if cfg.HeadToken != "" {
		t := server.NewBearerToken(cfg.HeadToken)
		a.token = &t
	}
	server.Handle(s, RouteRun, a.run)
	server.Handle(s, RouteResponses, a.responsesHandler(noPrefix))
	server.Handle(s, RouteRolloutResponses, a.responsesHandler(rolloutPrefix))
	server.Handle(s, RouteCaptureResponses, a.responsesHandler(capturePrefix))
	server.HandleStream(s, RouteAggregateMetrics, a.streamAggregateMetrics, a.aggregateMetrics, server.BulkBody())
	if a.episodes != nil {
		s.HandleFunc(RouteEpisodes, a.serveEpisodes)
	}
	return nil
}

// endpoint appends path (an escaped path) to base's path, keeping base's
// query string.
func endpoint(base *url.URL, path string) string {
	return base.JoinPath(path).String()
}

// joinRoot is what a path is appended to by concatenation in place of
// endpoint: base's endpoint for a plain segment with that segment cut
// off, or "" when base has a query or fragment (then endpoint must run).
// JoinPath cleans the joined path, and cleaning leaves a path made of
// plain segments (no "." or "..", nothing to escape) as it is, so
// joinRoot(base)+p equals endpoint(base, p) for such a p.
func joinRoot(base *url.URL) string {
	const probe = "/x"
	if base.RawQuery != "" || base.ForceQuery || base.Fragment != "" {
		return ""
	}
	root, ok := strings.CutSuffix(endpoint(base, probe), probe)
	if !ok {
		return ""
	}
	return root
}

// rolloutEndpoint is endpoint(base, prefix+path) for a rollout prefix and
// a route path, both plain segments (a prefix is only made for a valid
// rollout id), built by concatenation onto root (joinRoot(base)) when it
// can be: JoinPath's parse and clean cost more than a rollout's spans.
func rolloutEndpoint(base *url.URL, root, prefix, path string) string {
	if root == "" {
		return endpoint(base, prefix+path)
	}
	return root + prefix + path
}

type agent struct {
	cfg                          Config
	client                       *server.Client
	model, resources             *url.URL
	modelRoot, resourcesRoot     string // joinRoot of model and resources
	modelHost                    string // the model server's host and port, for gen_ai.* metrics
	modelPort                    int
	modelURL, seedURL, verifyURL string
	aggregateURL                 string
	warnNoAggregates             sync.Once
	// episodes records every episode in flight and its steps, whatever
	// the process's telemetry (see serveEpisodes).
	episodes *live.Episodes
	// token checks the episodes route's bearer token; nil without a head
	// token.
	token *server.BearerToken
}

// toolURL is the resources server's route for a tool: the name is one
// path segment, escaped; prefix is a rollout-id path prefix or "".
func (a *agent) toolURL(prefix, name string) string {
	return endpoint(a.resources, prefix+"/"+url.PathEscape(name))
}

// prefixes reports whether the calls of a rollout running under ctx carry
// the rollout-id path prefix: when the fleet's observability_enabled is
// set, as upstream decides, or when this process exports traces and the
// rollout's trace was not sampled out, so that the servers a rollout calls
// (a Python resources server strips the prefix whatever its telemetry)
// can put the id on their own spans. A sampled-out trace, or a fleet
// exporting metrics only, has no spans to put it on.
func (a *agent) prefixes(ctx context.Context) bool {
	return a.cfg.ObservabilityEnabled || telemetry.Get().TracesExporting() && !lens.SampledOut(ctx)
}

// rolloutPrefix is the path prefix of the calls of a rollout running
// under ctx, "/ng-rollout/<id>", or "" when there is no id or calls are
// not prefixed.
func (a *agent) rolloutPrefix(ctx context.Context, id string) string {
	if id == "" || !a.prefixes(ctx) {
		return ""
	}
	return protocol.RolloutPath(id, "")
}

// inbound returns the request a handler answers (the runtime keeps it
// in the handler's context).
func (a *agent) inbound(ctx context.Context) *http.Request { return server.Request(ctx) }

// inboundCookies returns the cookies of the request a handler answers.
func (a *agent) inboundCookies(ctx context.Context) []*http.Cookie {
	if r := a.inbound(ctx); r != nil {
		return r.Cookies()
	}
	return nil
}

// prefixMode says which form of /v1/responses a handler serves.
type prefixMode int

const (
	noPrefix      prefixMode = iota // /v1/responses
	rolloutPrefix                   // /ng-rollout/<id>/v1/responses
	capturePrefix                   // /ng-rollout/<id>/training-token-capture/v1/responses
)

// modelPath returns the rollout id of the request's prefix and the path
// (escaped) of the model call, which keeps the inbound prefix, as
// upstream's episodes do.
func (a *agent) modelPath(ctx context.Context, mode prefixMode) (id, path string) {
	if mode == noPrefix {
		return "", protocol.PathResponses
	}
	r := a.inbound(ctx)
	if r == nil {
		return "", protocol.PathResponses
	}
	id = r.PathValue("rollout_id")
	path = protocol.RolloutPrefix + url.PathEscape(id)
	if mode == capturePrefix {
		path += protocol.TokenCaptureSegment
	}
	return id, path + protocol.PathResponses
}

// mergeCookies joins cookie lists as a cookie jar keyed by name would:
// a later cookie replaces an earlier one of the same name, in place.
func mergeCookies(lists ...[]*http.Cookie) []*http.Cookie {
	var out []*http.Cookie
	for _, l := range lists {
	next:
		for _, c := range l {
			for i, o := range out {
				if o.Name == c.Name {
					out[i] = c
					continue next
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// ownCookies returns the cookies the response being answered sets so far:
// the agent's own session cookie, set by the runtime before the handler
// runs.
func ownCookies(ctx context.Context) []*http.Cookie {
	h := server.ResponseHeader(ctx)
	var out []*http.Cookie
	for _, line := range h.Values("Set-Cookie") {
		if c, err := http.ParseSetCookie(line); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// setCookies adds a Set-Cookie header for each cookie (name and value,
// Path=/, SameSite=Lax) to the response being answered.
func setCookies(ctx context.Context, cookies []*http.Cookie) {
	h := server.ResponseHeader(ctx)
	if h == nil {
		return
	}
	for _, c := range cookies {
		if v := (&http.Cookie{Name: c.Name, Value: c.Value, Path: "/", SameSite: http.SameSiteLaxMode}).String(); v != "" {
			h.Add("Set-Cookie", v)
		}
	}
}
