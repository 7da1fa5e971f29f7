package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// ServerName is the relay's implementation name, the key under
// environment_servers in a config (upstream's environment_servers/legacy_agent).
const ServerName = "legacy_agent"

// AgentServerField is the block field naming the agent the relay fronts: a
// reference {type: responses_api_agents, name: <agent instance>}.
const AgentServerField = "agent_server"

// Defaults of the limits upstream's LegacyAgent config declares. A relay
// enforces none of them; they are accepted so that upstream's blocks load.
const (
	DefaultEpisodeTimeoutSeconds = 21600
	DefaultCleanupTimeoutSeconds = 180
)

// callTimeout bounds one relayed call. Upstream's relay calls without a
// timeout and leaves every limit to the agent; a Go client needs a bound,
// so this one is far beyond any episode.
const callTimeout = 7 * 24 * time.Hour

// maxRelayBody bounds a /run body the relay holds while relaying it: the
// agent behind it applies its own limit (and its 413 is passed on), so the
// relay's is the runtime's bulk one rather than a second, stricter copy.
const maxRelayBody = server.DefaultMaxBodyBytes * server.BulkFactor

// Config is the legacy_agent block minus its agent_server reference (see
// gymconfig.Instance.ImplConfig): upstream's LegacyAgentEnvironmentServerConfig,
// whose other keys are all limits a relay does not enforce. Any other key
// is refused, as upstream's config forbids extra keys.
type Config struct {
	// MaxConcurrentEpisodes (positive, or unset) is accepted and not
	// enforced; when set, QueueTimeoutSeconds must be too.
	MaxConcurrentEpisodes *int `json:"max_concurrent_episodes,omitempty"`
	// QueueTimeoutSeconds (positive, or unset) is accepted and not enforced.
	QueueTimeoutSeconds *float64 `json:"queue_timeout_seconds,omitempty"`
	// DefaultEpisodeTimeoutSeconds (positive; DefaultEpisodeTimeoutSeconds
	// when unset) is accepted and not enforced.
	DefaultEpisodeTimeoutSeconds *float64 `json:"default_episode_timeout_seconds,omitempty"`
	// CleanupTimeoutSeconds (positive; DefaultCleanupTimeoutSeconds when
	// unset) is accepted and not enforced.
	CleanupTimeoutSeconds *float64 `json:"cleanup_timeout_seconds,omitempty"`
	// AgentServer is set only when the block's agent_server is not a
	// reference {type, name} (a reference is taken out of the config and
	// its URL given as AgentURL): Validate then says what is wrong.
	AgentServer any `json:"agent_server,omitempty"`

	// AgentURL is the base URL of the agent (http://host:port), from the
	// agent_server reference; required by Register.
	AgentURL string `json:"-"`
	// AgentName is the agent's instance name, for logs.
	AgentName string `json:"-"`
	// Instance is this relay's instance name, for logs and messages.
	Instance string `json:"-"`
	// Logger receives the relay's logs; nil means slog.Default().
	Logger *slog.Logger `json:"-"`
}

// Defaults returns a Config with every limit unset (their defaults apply).
func Defaults() Config { return Config{} }

// Validate checks the limits as upstream's config does: each positive when
// set, queue_timeout_seconds required with max_concurrent_episodes, and
// agent_server, when left in the config, is not a reference.
func (c Config) Validate() error {
	var errs []error
	if c.AgentServer != nil {
		errs = append(errs, fmt.Errorf("%s: want a reference {type: %s, name: <agent instance>}, got %s",
			AgentServerField, contract.ServerTypeAgent, describe(c.AgentServer)))
	}
	if c.MaxConcurrentEpisodes != nil && *c.MaxConcurrentEpisodes <= 0 {
		errs = append(errs, fmt.Errorf("max_concurrent_episodes: want an integer above 0, got %d", *c.MaxConcurrentEpisodes))
	}
	for _, f := range []struct {
		key string
		v   *float64
	}{
		{"queue_timeout_seconds", c.QueueTimeoutSeconds},
		{"default_episode_timeout_seconds", c.DefaultEpisodeTimeoutSeconds},
		{"cleanup_timeout_seconds", c.CleanupTimeoutSeconds},
	} {
		if f.v != nil && !(*f.v > 0) {
			errs = append(errs, fmt.Errorf("%s: want a number above 0, got %v", f.key, *f.v))
		}
	}
	if c.MaxConcurrentEpisodes != nil && c.QueueTimeoutSeconds == nil {
		errs = append(errs, errors.New("queue_timeout_seconds is required when max_concurrent_episodes is set"))
	}
	return errors.Join(errs...)
}

// setLimits names the limits the config sets, which a relay ignores.
func (c Config) setLimits() []string {
	var out []string
	if c.CleanupTimeoutSeconds != nil {
		out = append(out, "cleanup_timeout_seconds")
	}
	if c.DefaultEpisodeTimeoutSeconds != nil {
		out = append(out, "default_episode_timeout_seconds")
	}
	if c.MaxConcurrentEpisodes != nil {
		out = append(out, "max_concurrent_episodes")
	}
	if c.QueueTimeoutSeconds != nil {
		out = append(out, "queue_timeout_seconds")
	}
	return out
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	return string(b)
}

// relayClass is the class name upstream's relay names its session
// cookie (and itself, in its inner-server error) after
// (contract.SessionCookieName).
const relayClass = "LegacyAgentEnvironmentServer"

// ServerOptions are the server options a relay instance needs: its type
// and its own session cookie, which upstream's servers all set.
func ServerOptions(instance string) server.Options {
	if instance == "" {
		instance = ServerName
	}
	return server.Options{Type: contract.ServerTypeEnvironment, SessionCookie: contract.SessionCookieName(relayClass, instance)}
}

// NewClient returns the client a relay calls its agent with: a call is
// bounded only by a week, since the agent keeps its own limits.
func NewClient() *server.Client {
	return server.NewClient(server.ClientOptions{Timeout: callTimeout})
}

// RelayedHeader reports whether the relay passes header name on (in either
// direction). Like upstream's relay it drops connection, content-encoding,
// content-length, cookie, host, keep-alive, transfer-encoding and upgrade
// (any case): they describe a connection or a body, which each hop frames
// itself, and cookies travel on their own. It also drops accept-encoding,
// so that the relay's client asks for and decodes its own encoding and an
// answer comes back decoded, as upstream's aiohttp client decodes it.
func RelayedHeader(name string) bool {
	switch strings.ToLower(name) {
	case "connection", "content-encoding", "content-length", "cookie", "host",
		"keep-alive", "transfer-encoding", "upgrade", "accept-encoding":
		return false
	}
	return true
}

// relay fronts one agent.
type relay struct {
	cfg    Config
	client *server.Client
	run    string // the agent's /run URL
	agg    string // the agent's /aggregate_metrics URL
	log    *slog.Logger
}

// Register checks cfg and registers POST /run and POST /aggregate_metrics
// on s, relayed to cfg.AgentURL through client (nil means NewClient()).
// s should be built from ServerOptions. A config that sets a limit gets
// upstream's warning: a relay does not enforce it.
func Register(s *server.Server, cfg Config, client *server.Client) error {
	if s == nil {
		return errors.New("envserver: Register needs a server")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.AgentURL == "" {
		return fmt.Errorf("%s: required: a reference {type: %s, name: <agent instance>}", AgentServerField, contract.ServerTypeAgent)
	}
	if client == nil {
		client = NewClient()
	}
	base := strings.TrimRight(cfg.AgentURL, "/")
	r := &relay{cfg: cfg, client: client, run: base + "/run", agg: base + "/aggregate_metrics", log: cfg.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	if set := cfg.setLimits(); len(set) > 0 {
		name := cfg.Instance
		if name == "" {
			name = ServerName
		}
		r.log.Warn(fmt.Sprintf("%s sets %s, which a relay does not enforce. This parameter has no effect.", name, strings.Join(set, ", ")))
	}
	// A rollout takes as long as it takes: the write timeout starts with
	// the answer (upstream's relay sets none at all).
	s.HandleFunc("POST /run", r.relayRun)
	s.HandleStreamFunc("POST /aggregate_metrics", r.aggregate)
	return nil
}

// relayRun passes one /run to the agent and its answer back, unread:
// body, status, cookies and headers (filtered by RelayedHeader both ways;
// a repeated request header reduced to its last value, every repeated
// answer header, Set-Cookie above all, kept).
func (r *relay) relayRun(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRelayBody))
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			writeJSON(w, http.StatusRequestEntityTooLarge, protocol.DetailBody{Detail: fmt.Sprintf("request body larger than %d bytes", maxErr.Limit)})
			return
		}
		writeJSON(w, http.StatusBadRequest, protocol.DetailBody{Detail: "read request body: " + err.Error()})
		return
	}
	// A repeated request header goes on with its last value only, as
	// upstream's relay (which gathers them in a dict) sends it.
	header := http.Header{}
	for k, vs := range req.Header {
		if RelayedHeader(k) && len(vs) > 0 {
			header[k] = vs[len(vs)-1:]
		}
	}
	reply, err := r.client.Post(withRolloutID(req.Context(), body), r.run, server.RawJSON(body), nil, server.Call{
		Cookies: req.Cookies(), Header: header, AnyStatus: true,
	})
	if err != nil {
		r.fail(w, err)
		return
	}
	out := w.Header()
	for k, vs := range reply.Header {
		if RelayedHeader(k) {
			out[k] = append(out[k], vs...)
		}
	}
	if _, ok := reply.Header["Content-Type"]; !ok {
		out["Content-Type"] = nil // no sniffed type: the agent set none
	}
	out.Set("Content-Length", strconv.Itoa(len(reply.Body)))
	w.WriteHeader(reply.Status)
	_, _ = w.Write(reply.Body)
}

// withRolloutID names the rollout of a relayed /run on the request's
// SERVER span and, through ctx, on the CLIENT span of the call to the
// agent, as every other span of a rollout carries it. The relay passes
// the body on unread; it reads the row's bookkeeping members (and nothing
// else of it) only when that span records, and a body it cannot read
// names no rollout.
func withRolloutID(ctx context.Context, body []byte) context.Context {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return ctx
	}
	id, ok := protocol.RolloutIDOfRow(body)
	if !ok {
		return ctx
	}
	span.SetAttributes(attribute.String(contract.AttrRolloutID, id))
	return server.WithRolloutID(ctx, id)
}

// fail answers a call to the agent that got no answer as upstream answers
// an exception: 500 with a JSON string.
func (r *relay) fail(w http.ResponseWriter, err error) {
	r.log.Error("relaying to the agent failed", "agent", r.cfg.AgentName, "err", err)
	writeJSON(w, http.StatusInternalServerError, err.Error())
}

// aggregateRequest is upstream's AggregateMetricsRequest: verify_responses
// is required, a list of objects; other keys are dropped.
type aggregateRequest struct {
	VerifyResponses []json.RawMessage `json:"verify_responses"`
}

// aggregateMetrics is upstream's AggregateMetrics as its relay answers it:
// the five keys, defaults filled, other keys dropped.
type aggregateMetrics struct {
	GroupLevelMetrics  []json.RawMessage          `json:"group_level_metrics"`
	AgentMetrics       map[string]json.RawMessage `json:"agent_metrics"`
	KeyMetrics         map[string]json.RawMessage `json:"key_metrics"`
	PerfSummary        map[string]json.RawMessage `json:"perf_summary"`
	RepeatLevelMetrics []json.RawMessage          `json:"repeat_level_metrics"`
}

// aggregate checks the body as upstream's relay does, posts
// {"verify_responses": [...]} to the agent and answers its metrics. A
// non-2xx answer of the agent is a 500 saying so, with the agent's body.
// A whole collection's results pass through here twice (the request and
// the per-task answer), so a body of the usual shape is passed on as it
// came (see forwardAggregate and jsonskim.CompleteAggregateMetrics) and only others are
// decoded.
//
// A body of the streamed shape (see aggstream) is passed on as it arrives,
// each result once read, so the agent reads the collection's results
// while they are produced (the route is the server's HandleStreamFunc:
// the collector's pace is the body's); an answer the agent marks complete
// (aggstream.CompleteHeader) is passed back the same way, as it arrives.
func (r *relay) aggregate(w http.ResponseWriter, req *http.Request) {
	limited := http.MaxBytesReader(w, req.Body, maxRelayBody)
	seen := &bytes.Buffer{}
	answer, err := aggstream.Forward(req.Context(), r.client, r.agg, io.TeeReader(limited, seen))
	if err == nil && answer.Passed() {
		server.WriteStreamed(w, server.Streamed{Header: answer.Header(), Write: func(w io.Writer) error {
			_, err := answer.WriteTo(w)
			return err
		}})
		return
	}
	if err == nil {
		r.answerAggregate(w, answer.Raw)
		return
	}
	var se *server.StatusError
	switch {
	case errors.As(err, &se):
		writeJSON(w, http.StatusInternalServerError, fmt.Sprintf("Hit an exception in %s calling an inner server: %s", r.cookieName(), pyBytes(se.Raw)))
		return
	case !errors.Is(err, server.ErrNotStreamed):
		r.fail(w, err)
		return
	}
	rest, err := io.ReadAll(limited)
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, protocol.DetailBody{Detail: "request body: " + err.Error()})
		return
	}
	body := append(seen.Bytes(), rest...)
	fwd, ok := forwardAggregate(body)
	if !ok {
		in, verr := checkAggregate(body)
		if verr != nil {
			writeJSON(w, http.StatusUnprocessableEntity, verr)
			return
		}
		if fwd, err = json.Marshal(in); err != nil {
			r.fail(w, err)
			return
		}
	}
	reply, err := r.client.Post(req.Context(), r.agg, server.RawJSON(fwd), nil, server.Call{AnyStatus: true})
	if err != nil {
		r.fail(w, err)
		return
	}
	if reply.Status < 200 || reply.Status > 299 {
		writeJSON(w, http.StatusInternalServerError, fmt.Sprintf("Hit an exception in %s calling an inner server: %s", r.cookieName(), pyBytes(reply.Body)))
		return
	}
	r.answerAggregate(w, reply.Body)
}

// answerAggregate answers the agent's 2xx /aggregate_metrics answer body:
// as it came when it has the usual shape, else with upstream's defaults
// filled.
func (r *relay) answerAggregate(w http.ResponseWriter, body []byte) {
	if jsonskim.CompleteAggregateMetrics(body) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return
	}
	var m aggregateMetrics
	if err := json.Unmarshal(body, &m); err != nil {
		r.fail(w, fmt.Errorf("the agent's /aggregate_metrics answer: %w", err))
		return
	}
	if m.GroupLevelMetrics == nil {
		m.GroupLevelMetrics = []json.RawMessage{}
	}
	if m.RepeatLevelMetrics == nil {
		m.RepeatLevelMetrics = []json.RawMessage{}
	}
	if m.AgentMetrics == nil {
		m.AgentMetrics = map[string]json.RawMessage{}
	}
	if m.KeyMetrics == nil {
		m.KeyMetrics = map[string]json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, m)
}

// cookieName is the relay's session cookie name, which upstream's
// inner-server error message names the server by.
func (r *relay) cookieName() string {
	name := r.cfg.Instance
	if name == "" {
		name = ServerName
	}
	return contract.SessionCookieName(relayClass, name)
}

// checkAggregate validates an /aggregate_metrics body as upstream's
// AggregateMetricsRequest does, with its 422 details.
func checkAggregate(body []byte) (*aggregateRequest, *protocol.ValidationError) {
	var top any
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil {
		return nil, &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrJSONInvalid,
			Loc: []any{"body", int(dec.InputOffset())}, Msg: "JSON decode error", Input: json.RawMessage("{}")}}}
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, &protocol.ValidationError{Detail: []protocol.FieldError{{Type: "model_attributes_type",
			Loc: []any{"body"}, Msg: "Input should be a valid dictionary or object to extract fields from", Input: json.RawMessage(body)}}}
	}
	raw, ok := obj["verify_responses"]
	if !ok {
		return nil, &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrMissing,
			Loc: []any{"body", "verify_responses"}, Msg: "Field required", Input: json.RawMessage(body)}}}
	}
	list, ok := raw.([]any)
	if !ok {
		in, _ := json.Marshal(raw)
		return nil, &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrList,
			Loc: []any{"body", "verify_responses"}, Msg: "Input should be a valid list", Input: in}}}
	}
	out := &aggregateRequest{VerifyResponses: make([]json.RawMessage, len(list))}
	var errs []protocol.FieldError
	for i, e := range list {
		b, _ := json.Marshal(e)
		if _, isObj := e.(map[string]any); !isObj {
			errs = append(errs, protocol.FieldError{Type: protocol.ErrDict,
				Loc: []any{"body", "verify_responses", i}, Msg: "Input should be a valid dictionary", Input: b})
			continue
		}
		out.VerifyResponses[i] = b
	}
	if len(errs) > 0 {
		return nil, &protocol.ValidationError{Detail: errs}
	}
	return out, nil
}

// pyBytes renders b as Python's repr of a bytes value renders it, as
// upstream's inner-server error message quotes the peer's body.
func pyBytes(b []byte) string {
	var sb strings.Builder
	quote := byte('\'')
	if bytes.IndexByte(b, '\'') >= 0 && bytes.IndexByte(b, '"') < 0 {
		quote = '"'
	}
	sb.WriteString("b")
	sb.WriteByte(quote)
	for _, c := range b {
		switch {
		case c == quote || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte(quote)
	return sb.String()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal("encode response: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
