package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Timeout bounds one logical call, retries included; 0 means 60 s.
	Timeout time.Duration
	// Retries is how many times one call is sent again after a failed
	// attempt that may be retried (see Client); 0 means 3, negative means
	// none.
	Retries int
	// Backoff is the first wait between attempts, doubled each time (up
	// to 2 s) and jittered; 0 means 50 ms. A 503 or 429 answer's
	// Retry-After replaces it. No wait outlasts Timeout.
	Backoff time.Duration
	// MaxConnsPerHost caps connections to one peer; 0 means 512.
	MaxConnsPerHost int
}

// Client makes the server-to-server calls of a fleet. Every call is one
// CLIENT span (when the http_client group is on) around all its attempts,
// named as upstream's egress client names it (contract.ClientSpanName,
// "HTTP POST"), and carries the W3C trace context of ctx. A failed attempt
// is sent again, within Retries and Timeout: always when the request never
// reached the peer (a refused or failed dial) or the peer said it did not
// process it (503 or 429, after its Retry-After); after a connection that
// broke before the answer only on a route the protocol makes idempotent
// (/seed_session, /verify and the model routes, not /run). A URL
// whose path holds a rollout-id prefix (/ng-rollout/<id>/, see
// protocol.RolloutPath) is sent as it is; the id labels the call's span.
type Client struct {
	http    *http.Client
	retry   retryPolicy
	timeout time.Duration
	// targets caches, per URL string, what every call to it needs: the
	// URL, its safe form and the span's static attributes. A fleet calls a
	// handful of URLs millions of times; a rollout-prefixed URL is looked
	// up by the part before its prefix, so rollout ids never fill it.
	targets sync.Map
	cached  atomic.Int64
	// sizes are the body size histograms of the telemetry set-up they
	// were made in (see bodySizes).
	sizes atomic.Pointer[clientSizes]
}

// maxCachedTargets bounds the cache, so a caller that varies its URLs (a
// query string per call, say) costs a parse per call and no memory.
const maxCachedTargets = 1024

// target is one destination: cached as it is for a plain URL, or a copy
// made per call for a rollout-prefixed one.
type target struct {
	url  string // where the request goes
	safe string // url without query, fragment or user info: url.full
	// static are the CLIENT span's attributes that do not depend on the
	// path: method, server.address, server.port. Read-only once cached.
	static []attribute.KeyValue
	// attrs are static and url.full, for a cached target; nil for a
	// prefixed one, whose url.full is per call.
	attrs     []attribute.KeyValue
	rolloutID string // the id of the URL's rollout prefix, if any
	// host is the URL's host[:port], which static is made of: the body
	// size histograms' attribute sets are kept per host.
	host string
	// idempotent says the route may be sent again after a connection that
	// broke under it (see idempotentPath).
	idempotent bool
}

// clientSpanName is every CLIENT span's name: the client only POSTs.
var clientSpanName = contract.ClientSpanName(http.MethodPost)

// target returns what a call to rawURL needs.
func (c *Client) target(rawURL string) (target, error) {
	if t, ok := c.targets.Load(rawURL); ok {
		return *t.(*target), nil
	}
	if origin, id, rest, ok := cutRolloutURL(rawURL); ok {
		base, err := c.cachedTarget(origin)
		if err == nil {
			t := target{url: rawURL, safe: rawURL, static: base.static, host: base.host, rolloutID: id, idempotent: idempotentPath(rest)}
			if base.safe != origin {
				// User info or an odd spelling: the safe form is rebuilt.
				u, err := url.Parse(rawURL)
				if err != nil {
					return target{}, err
				}
				t.safe = lens.SafeURL(u)
			} else if end := strings.IndexAny(rawURL, "?#"); end >= 0 {
				t.safe = rawURL[:end]
			}
			return t, nil
		}
	}
	t, err := c.cachedTarget(rawURL)
	if err != nil {
		return target{}, err
	}
	return *t, nil
}

// cachedTarget parses rawURL into a target, cached while the cache has
// room.
func (c *Client) cachedTarget(rawURL string) (*target, error) {
	if t, ok := c.targets.Load(rawURL); ok {
		return t.(*target), nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	safe := lens.SafeURL(u)
	static := clientAttrs(u)
	attrs := append(slices.Clip(static), attribute.String(contract.AttrURLFull, safe))
	t := &target{url: u.String(), safe: safe, static: static, attrs: attrs, host: u.Host, idempotent: idempotentPath(u.Path)}
	if c.cached.Load() < maxCachedTargets {
		if _, loaded := c.targets.LoadOrStore(rawURL, t); !loaded {
			c.cached.Add(1)
		}
	}
	return t, nil
}

// cutRolloutURL finds a rollout-id prefix (/ng-rollout/<id>, the id valid)
// in rawURL's path and returns the URL before it, the id and the path
// after it (still escaped).
func cutRolloutURL(rawURL string) (origin, id, rest string, ok bool) {
	scheme := strings.Index(rawURL, "://")
	if scheme < 0 {
		return "", "", "", false
	}
	pathStart := strings.IndexByte(rawURL[scheme+3:], '/')
	if pathStart < 0 {
		return "", "", "", false
	}
	pathStart += scheme + 3
	path := rawURL[pathStart:]
	if end := strings.IndexAny(path, "?#"); end >= 0 {
		path = path[:end]
	}
	i := strings.Index(path, protocol.RolloutPrefix)
	if i < 0 {
		return "", "", "", false
	}
	after := path[i+len(protocol.RolloutPrefix):]
	j := strings.IndexByte(after, '/')
	if j < 0 {
		return "", "", "", false
	}
	if id = after[:j]; !protocol.ValidRolloutID(id) {
		return "", "", "", false
	}
	return rawURL[:pathStart+i], id, after[j:], true
}

// NewClient returns a client with its own connection pool.
func NewClient(opts ClientOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.MaxConnsPerHost <= 0 {
		opts.MaxConnsPerHost = 512
	}
	tr := &http.Transport{
		Proxy:               nil, // fleet peers are addressed directly
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        opts.MaxConnsPerHost,
		MaxIdleConnsPerHost: opts.MaxConnsPerHost,
		MaxConnsPerHost:     opts.MaxConnsPerHost,
		IdleConnTimeout:     clientIdleConnTimeout,
	}
	return &Client{http: &http.Client{Transport: tr}, retry: newRetryPolicy(opts), timeout: opts.Timeout}
}

// CloseIdleConnections closes pooled connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// PostJSON sends req as JSON to rawURL and decodes a 2xx answer into resp
// (which may be nil). A non-2xx answer is a *StatusError.
func (c *Client) PostJSON(ctx context.Context, rawURL string, req, resp any) error {
	_, err := c.Post(ctx, rawURL, req, resp, Call{})
	return err
}

// Call adjusts one call of Client.Post.
type Call struct {
	// Cookies are sent with the request (NeMo Gym's servers keep a
	// rollout's session in a cookie, and its callers pass it on).
	Cookies []*http.Cookie
	// Header holds extra request headers, sent as they are, for a server
	// that relays its caller's headers (upstream's legacy_agent relay).
	// Content-Type and the trace context are the client's own and replace
	// any given here.
	Header http.Header
	// AnyStatus accepts an answer of any status: its raw body is returned
	// in Reply.Body (and decoded into resp only when it is a 2xx), instead
	// of a *StatusError. Upstream's agent treats a tool route's answer
	// this way: whatever the status, the body is the tool's output.
	AnyStatus bool
	// TimeFirstByte measures Reply.FirstByte: the time the answer's
	// header was read, taken when the transport returns the response (a
	// clock read; no client trace, which would cost three allocations per
	// call).
	TimeFirstByte bool
}

// Reply is what the peer answered a call of Client.Post.
type Reply struct {
	// Status is the HTTP status.
	Status int
	// Body is the raw body with Call.AnyStatus, else nil.
	Body []byte
	// Cookies are the cookies the answer set.
	Cookies []*http.Cookie
	// Header is the answer's header.
	Header http.Header
	// FirstByte is how long after the call started (retries included)
	// the answer began to arrive (its header was read, before the body),
	// with Call.TimeFirstByte; -1 when it was not measured or no answer
	// came.
	FirstByte time.Duration
	// headerAt is when the answer's header was read, with
	// Call.TimeFirstByte.
	headerAt time.Time
	// Span is the call's CLIENT span, still open, from Client.PostSpan (a
	// non-recording span when the http_client group is off or the trace
	// was sampled out); nil from Post, which ends it. End it with
	// EndSpan, not Span.End: the call's attributes are set as it ends.
	Span trace.Span
	// attrs are the open span's attributes, gathered for one
	// SetAttributes call in EndSpan; nil when the span does not record.
	attrs *lens.Attrs
}

// AddSpanAttributes adds kv to the open CLIENT span of Client.PostSpan;
// they reach the span with the call's own attributes when EndSpan ends
// it. It does nothing when the span does not record (Span.IsRecording
// says whether kv is worth building) or has been ended.
func (r *Reply) AddSpanAttributes(kv ...attribute.KeyValue) {
	if r.attrs != nil {
		r.attrs.Add(kv...)
	}
}

// EndSpan ends the open CLIENT span of Client.PostSpan, with every
// attribute of the call and of AddSpanAttributes set in one call. Span
// stays readable (its span context) afterwards; a second call, or a call
// on Post's reply, does nothing.
func (r *Reply) EndSpan() {
	if r.attrs != nil {
		r.attrs.SetOn(r.Span)
		r.attrs = nil
	}
	if r.Span != nil {
		r.Span.End() // a span ends once: the SDK ignores a second End
	}
}

// Post sends req as JSON to rawURL (a RawJSON req is sent as it is, see
// RawJSON), with the call's cookies, and decodes a
// 2xx answer into resp (which may be nil). A non-2xx answer is a
// *StatusError unless call.AnyStatus is set. The reply carries the status
// and the cookies the answer set.
func (c *Client) Post(ctx context.Context, rawURL string, req, resp any, call Call) (reply Reply, err error) {
	reply, err = c.post(ctx, rawURL, req, resp, call, false)
	reply.Span = nil
	return reply, err
}

// PostSpan is Post that leaves the call's CLIENT span open, whatever the
// outcome: the caller adds what it knows of the answer with
// Reply.AddSpanAttributes (Reply.Span.IsRecording says whether that is
// worth computing) and must end it with Reply.EndSpan. The span's status
// is set already; its attributes, the call's status code and error
// among them, are set by EndSpan.
func (c *Client) PostSpan(ctx context.Context, rawURL string, req, resp any, call Call) (Reply, error) {
	reply, err := c.post(ctx, rawURL, req, resp, call, true)
	if reply.Span == nil {
		reply.Span = nonRecordingSpan
	}
	return reply, err
}

func (c *Client) post(ctx context.Context, rawURL string, req, resp any, call Call, keepSpan bool) (reply Reply, err error) {
	reply.FirstByte = -1
	tg, err := c.target(rawURL)
	if err != nil {
		return reply, fmt.Errorf("client: bad URL: %w", err)
	}
	body, err := encodeRequest(req)
	if err != nil {
		return reply, fmt.Errorf("client: encode request: %w", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	var span trace.Span
	var attrs *lens.Attrs // the recording span's attributes, set in one call as it ends
	if lens.Enabled(telemetry.GroupHTTPClient) {
		ctx, span = lens.Start(ctx, telemetry.GroupHTTPClient, clientSpanName, startOptions(ctx)...)
		if span.IsRecording() {
			// Sampled out, nothing set would be kept, and building the
			// attributes would allocate them for nothing.
			attrs = lens.NewAttrs()
			c.callAttributes(ctx, attrs, &tg)
		}
		defer func() {
			if attrs != nil {
				if status := StatusOf(err); status != 0 {
					attrs.Add(attribute.Int(contract.AttrHTTPResponseStatus, status))
				} else if reply.Status != 0 {
					attrs.Add(attribute.Int(contract.AttrHTTPResponseStatus, reply.Status))
				}
				if err != nil {
					attrs.Add(attribute.String(contract.AttrErrorType, errorClass(err)))
					span.SetStatus(codes.Error, err.Error())
				}
			}
			if keepSpan {
				reply.Span, reply.attrs = span, attrs
				return
			}
			if attrs != nil {
				attrs.SetOn(span)
				span.End()
			}
		}()
	}

	var resent int    // attempts sent again so far
	var giveUp string // why a retryable failure was not retried
	sizes := c.bodySizes()
	for {
		reply, err = c.once(ctx, &tg, bytes.NewReader(body), resp, call, sizes)
		r, again := c.retry.classify(reply, err, tg.idempotent)
		if !again {
			break
		}
		if resent >= c.retry.retries {
			giveUp = "no retries left"
			break
		}
		if ctx.Err() != nil {
			break
		}
		wait := c.retry.wait(resent, r)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			giveUp = "the next wait (" + wait.Round(time.Millisecond).String() + ") would outlast the call's time"
			break
		}
		metrics.RecordHTTPRetry(r.reason)
		resent++
		if attrs != nil {
			ev := []attribute.KeyValue{
				attribute.Int(contract.AttrHTTPRequestResendCount, resent),
				attribute.String(contract.AttrHTTPRetryReason, r.reason),
			}
			if reply.Status != 0 {
				ev = append(ev, attribute.Int(contract.AttrHTTPResponseStatus, reply.Status))
			}
			span.AddEvent(contract.EventRetry, trace.WithAttributes(ev...))
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			recordTimeout(ctx.Err())
			if err == nil {
				err = ctx.Err() // a 503 or 429 taken as it is (Call.AnyStatus)
			}
			return reply, fmt.Errorf("client: POST %s: %w (after %d attempts)", tg.safe, err, resent)
		}
	}
	reply.FirstByte = -1
	if call.TimeFirstByte && reply.Status != 0 && !reply.headerAt.IsZero() {
		reply.FirstByte = reply.headerAt.Sub(start)
	}
	if attrs != nil && resent > 0 {
		attrs.Add(attribute.Int(contract.AttrHTTPRequestResendCount, resent))
	}
	if err != nil {
		recordTimeout(err)
		switch {
		case giveUp != "":
			return reply, fmt.Errorf("client: POST %s: %w (gave up after %d attempts: %s)", tg.safe, err, resent+1, giveUp)
		case resent > 0:
			return reply, fmt.Errorf("client: POST %s: %w (after %d attempts)", tg.safe, err, resent+1)
		}
		return reply, fmt.Errorf("client: POST %s: %w", tg.safe, err)
	}
	return reply, nil
}

// nonRecordingSpan is Reply.Span when the http_client group is off.
var nonRecordingSpan = trace.SpanFromContext(context.Background())

// callAttributes gathers a CLIENT span's attributes known before the
// call: the target's cached list for a plain URL, else its static ones,
// url.full and the rollout id.
func (c *Client) callAttributes(ctx context.Context, attrs *lens.Attrs, tg *target) {
	id := tg.rolloutID
	if id == "" {
		id = RequestRolloutID(ctx)
	}
	if tg.attrs != nil && id == "" {
		attrs.Add(tg.attrs...)
		return
	}
	attrs.Add(tg.static...)
	attrs.Add(attribute.String(contract.AttrURLFull, tg.safe))
	if id != "" {
		attrs.Add(attribute.String(contract.AttrRolloutID, id))
	}
}

// recordTimeout counts a call that ended because its time ran out
// (gym.http.timeout_total): every call of a Client is internal, a call to a
// server of the fleet.
func recordTimeout(err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		metrics.RecordHTTPTimeout(true)
	}
}

// retryReason classifies a failed attempt that is retried, as upstream's
// egress client names the errors it retries (contract.Retry*).
func retryReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return contract.RetryTimeout
	case disconnected(err):
		return contract.RetryServerDisconnected
	}
	var op *net.OpError
	var errno syscall.Errno
	if errors.As(err, &op) || errors.As(err, &errno) {
		return contract.RetryClientOSError
	}
	return contract.RetryOther
}

// isTimeout reports a network error that says it timed out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// encodeRequest is req as a request body: a RawJSON as it is, anything
// else through encoding/json.
func encodeRequest(req any) ([]byte, error) {
	if raw, ok := req.(RawJSON); ok {
		return raw, nil
	}
	return json.Marshal(req)
}

// maxPresize bounds the buffer allocated for an answer on the word of its
// Content-Length (a larger one grows as it is read).
const maxPresize = 1 << 30

// maxErrorBody bounds how much of a non-2xx body is kept.
const maxErrorBody = 4096

// once sends one attempt of a call; with sizes (not nil) it records the
// attempt's body sizes (see clientSizes.attempt).
func (c *Client) once(ctx context.Context, tg *target, body io.Reader, resp any, call Call, sizes *clientSizes) (reply Reply, err error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, body)
	if err != nil {
		return Reply{}, err
	}
	var counted *sizeCount // the attempt's counted bodies, with sizes
	if sizes != nil {
		r, counted = sizes.attempt(r)
		defer func() { sizes.record(tg, reply.Status, counted, err) }()
	}
	for k, vs := range call.Header {
		r.Header[k] = append(r.Header[k], vs...)
	}
	r.Header.Set("Content-Type", "application/json")
	for _, ck := range call.Cookies {
		r.AddCookie(ck)
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	res, err := c.http.Do(r)
	if err != nil {
		// The transport's error repeats the full URL; keep the query out.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = tg.safe
		}
		return Reply{}, err
	}
	var headerAt time.Time
	if call.TimeFirstByte {
		// The transport hands the response over as soon as its header is
		// read: the answer's first bytes arrived just now.
		headerAt = time.Now()
	}
	if counted != nil {
		counted.answer(res)
	}
	defer res.Body.Close()
	reply = Reply{Status: res.StatusCode, Cookies: res.Cookies(), Header: res.Header, headerAt: headerAt}
	ok := res.StatusCode >= 200 && res.StatusCode <= 299
	if call.AnyStatus {
		raw, err := io.ReadAll(res.Body)
		if err != nil {
			return reply, fmt.Errorf("read response: %w", err)
		}
		reply.Body = raw
		if ok && resp != nil {
			if err := json.Unmarshal(raw, resp); err != nil {
				return reply, fmt.Errorf("decode response: %w", err)
			}
		}
		return reply, nil
	}
	if !ok {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		// Read a bounded rest too, so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return reply, &StatusError{Status: res.StatusCode, Body: peerMessage(raw), Raw: raw}
	}
	if resp == nil {
		_, err = io.Copy(io.Discard, res.Body)
		return reply, err
	}
	if read, ok := resp.(AnswerReader); ok {
		if err := read(res.Header, res.Body); err != nil {
			return reply, fmt.Errorf("read response: %w", err)
		}
		return reply, nil
	}
	if raw, ok := resp.(*RawJSON); ok { // taken as it came (see RawJSON)
		var buf bytes.Buffer
		if n := res.ContentLength; n > 0 && n <= maxPresize {
			buf.Grow(int(n) + bytes.MinRead) // read in place, not grown by doubling
		}
		if _, err := buf.ReadFrom(res.Body); err != nil {
			return reply, fmt.Errorf("read response: %w", err)
		}
		*raw = buf.Bytes()
		return reply, nil
	}
	if err := json.NewDecoder(res.Body).Decode(resp); err != nil {
		return reply, fmt.Errorf("decode response: %w", err)
	}
	return reply, nil
}

// neverSent reports whether err means the request never reached the
// peer: a refused or failed dial.
func neverSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func errorClass(err error) string {
	if s := StatusOf(err); s != 0 {
		return strconv.Itoa(s)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case neverSent(err):
		return "connection_refused"
	}
	return "_OTHER"
}

func clientAttrs(u *url.URL) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String(contract.AttrHTTPRequestMethod, http.MethodPost),
		attribute.String(contract.AttrServerAddress, u.Hostname()),
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		attrs = append(attrs, attribute.Int(contract.AttrServerPort, p))
	}
	return attrs
}

var (
	clientKind  = trace.WithSpanKind(trace.SpanKindClient)
	clientStart = []trace.SpanStartOption{clientKind} // read-only
)

type linksKey struct{}

// WithLinks returns a context whose client calls link their CLIENT spans
// to the given spans. The rollout collector uses it to start each rollout
// in a trace of its own that still points back at the collection job. The
// span start options are built here, once, so a context made up front can
// serve any number of calls without building them again.
func WithLinks(ctx context.Context, links ...trace.Link) context.Context {
	if len(links) == 0 {
		return ctx
	}
	opts := []trace.SpanStartOption{clientKind, trace.WithLinks(slices.Clone(links)...)}
	return context.WithValue(ctx, linksKey{}, opts)
}

// startOptions returns the CLIENT span start options for a call made with
// ctx: with the links of WithLinks, if any.
func startOptions(ctx context.Context) []trace.SpanStartOption {
	if opts, ok := ctx.Value(linksKey{}).([]trace.SpanStartOption); ok {
		return opts
	}
	return clientStart
}

// RequestRolloutID is the rollout a request handled (or a call made) with
// ctx belongs to: the id of its path prefix (see Options.RolloutPrefix) or
// of WithRolloutID, failing that the one its baggage carries
// (telemetry.WithRolloutID); "" when none names one. It is the id every
// span of the request carries as nemo.gym.rollout.id.
func RequestRolloutID(ctx context.Context) string {
	if id := RolloutID(ctx); id != "" {
		return id
	}
	return telemetry.RolloutIDFrom(ctx)
}

// WithRolloutID returns ctx naming the rollout the calls made with it
// belong to: RolloutID(ctx) returns id, and a Client's CLIENT spans carry
// it as nemo.gym.rollout.id. It changes no URL (see Client for the path
// prefix) and sends nothing: it is for a caller that knows the id before
// the callee does, as the collection driver knows it before /run.
func WithRolloutID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, rolloutKey{}, id)
}

// Defaults of the retry policy (ClientOptions.Retries and Backoff).
const (
	defaultRetries = 3
	defaultBackoff = 50 * time.Millisecond
	// maxBackoff caps the doubled backoff of one wait. Upstream's egress
	// client waits 0.5 s between attempts (nemo_gym 0.7.0
	// server_utils.py:614, :629, :649).
	maxBackoff = 2 * time.Second
)

// pathMessages is the Anthropic Messages route upstream's model servers
// serve beside /v1/responses and /v1/chat/completions (nemo_gym 0.7.0
// server_utils.py:774).
const pathMessages = "/v1/messages"

// idempotentPath reports whether a call to path (after any rollout
// prefix, a token-capture segment allowed) is to a route whose request may
// be sent twice with the effect of once, per upstream's protocol: a
// session seed and a verification (keyed by the rollout's session) and a
// model call. /run (a second one is a second rollout), /aggregate_metrics
// and tool calls are not. It matches the path's end, so a model reached
// under a base path (https://host/openai/v1/chat/completions) counts too.
func idempotentPath(path string) bool {
	if after, ok := strings.CutPrefix(path, protocol.TokenCaptureSegment); ok && strings.HasPrefix(after, "/") {
		path = after
	}
	for _, r := range [...]string{
		protocol.PathSeedSession, protocol.PathVerify,
		protocol.PathResponses, protocol.PathChatCompletions, pathMessages,
	} {
		if strings.HasSuffix(path, r) {
			return true
		}
	}
	return false
}

// retryPolicy is the one place that says which failed attempts a Client
// sends again, how many times and after how long. Upstream's client
// (nemo_gym 0.7.0 server_utils.py:581-654, _request_with_retries) retries
// a server disconnect and an OS error 0.5 s apart, and any other exception
// up to 3 tries, whatever the route. gymlens bounds every kind by Retries
// and the call's timeout and never replays a request the peer may have
// carried out unless the route is idempotent.
type retryPolicy struct {
	retries int           // most attempts sent again per call
	backoff time.Duration // first wait, doubled per attempt
}

func newRetryPolicy(opts ClientOptions) retryPolicy {
	p := retryPolicy{retries: opts.Retries, backoff: opts.Backoff}
	if p.retries == 0 {
		p.retries = defaultRetries
	} else if p.retries < 0 {
		p.retries = 0
	}
	if p.backoff <= 0 {
		p.backoff = defaultBackoff
	}
	return p
}

// retryCause is why an attempt is sent again.
type retryCause struct {
	reason string // the nemo.gym.http.retry_reason it counts under
	// after is the wait the peer asked for (Retry-After), when asked.
	after time.Duration
	asked bool
}

// classify says whether the attempt that got reply and err may be sent
// again, and why.
func (p retryPolicy) classify(reply Reply, err error, idempotent bool) (retryCause, bool) {
	switch {
	case reply.Status == http.StatusServiceUnavailable || reply.Status == http.StatusTooManyRequests:
		// The peer says it did not process the request (gymlens's own
		// servers answer 503 Retry-After: 1 to an overload, see limits.go).
		// Upstream counts a failure that is neither a disconnect nor an OS
		// error as "other".
		after, asked := retryAfter(reply.Header.Get("Retry-After"), time.Now())
		return retryCause{reason: contract.RetryOther, after: after, asked: asked}, true
	case err == nil || reply.Status != 0:
		// An answer came: the peer has run the request.
		return retryCause{}, false
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return retryCause{}, false
	case neverSent(err):
		return retryCause{reason: retryReason(err)}, true
	case idempotent && disconnected(err):
		// The connection broke before an answer: the peer may have run
		// the request, which only an idempotent route allows to repeat.
		return retryCause{reason: contract.RetryServerDisconnected}, true
	}
	return retryCause{}, false
}

// wait is how long to wait before sending again an attempt that failed
// for cause, after resent earlier retries: the peer's Retry-After plus up
// to one backoff of jitter (never less than asked), else the doubled
// backoff with equal jitter (between half and all of it).
func (p retryPolicy) wait(resent int, cause retryCause) time.Duration {
	if cause.asked {
		return cause.after + jitter(p.backoff)
	}
	d := maxBackoff
	if resent < 16 && p.backoff<<resent < maxBackoff {
		d = p.backoff << resent
	}
	return d/2 + jitter(d-d/2)
}

// jitter is a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// retryAfter reads a Retry-After header value as of now: a number of
// seconds or an HTTP date (RFC 9110 section 10.2.3); a date past is no
// wait. ok is false when v is empty or neither form.
func retryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 31); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// disconnected reports whether err is a connection that closed or reset
// under a request before its answer came. net/http reports a connection
// the peer closed before answering as an unexported error of its own,
// matched by its text.
func disconnected(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), errTextServerClosed)
}

// errTextServerClosed is the text of net/http's error for a connection
// the peer closed with no answer to the request on it.
const errTextServerClosed = "http: server closed idle connection"
