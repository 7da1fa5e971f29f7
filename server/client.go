package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Timeout bounds one logical call, retries included; 0 means 60 s.
	Timeout time.Duration
	// Retries is how many times a call is retried after a connection
	// error; 0 means 3, negative means none.
	Retries int
	// Backoff is the first wait between attempts, doubled each time; 0
	// means 50 ms.
	Backoff time.Duration
	// MaxConnsPerHost caps connections to one peer; 0 means 512.
	MaxConnsPerHost int
}

// Client makes the server-to-server calls of a fleet. Every call is one
// CLIENT span (when the http_client group is on) around all its attempts,
// and carries the W3C trace context of ctx. Only connection errors are
// retried: once a peer has the request, sending it again could repeat work.
type Client struct {
	http    *http.Client
	retries int
	backoff time.Duration
	timeout time.Duration
	// targets caches, per URL string, what every call to it needs: the
	// parsed URL, the span name and the span's static attributes. A fleet
	// calls a handful of URLs millions of times.
	targets sync.Map
	cached  atomic.Int64
}

// maxCachedTargets bounds the cache, so a caller that varies its URLs (a
// query string per call, say) costs a parse per call and no memory.
const maxCachedTargets = 1024

// target is one cached destination.
type target struct {
	u        *url.URL
	safe     string
	spanName string
	attrs    []attribute.KeyValue // the CLIENT span's; read-only once cached
}

func (c *Client) target(rawURL string) (*target, error) {
	if t, ok := c.targets.Load(rawURL); ok {
		return t.(*target), nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	t := &target{u: u, safe: lens.SafeURL(u), spanName: http.MethodPost + " " + u.Path,
		attrs: clientAttrs(u)}
	if c.cached.Load() < maxCachedTargets {
		if _, loaded := c.targets.LoadOrStore(rawURL, t); !loaded {
			c.cached.Add(1)
		}
	}
	return t, nil
}

// NewClient returns a client with its own connection pool.
func NewClient(opts ClientOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Retries == 0 {
		opts.Retries = 3
	} else if opts.Retries < 0 {
		opts.Retries = 0
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 50 * time.Millisecond
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
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{http: &http.Client{Transport: tr}, retries: opts.Retries, backoff: opts.Backoff, timeout: opts.Timeout}
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
	// AnyStatus accepts an answer of any status: its raw body is returned
	// in Reply.Body (and decoded into resp only when it is a 2xx), instead
	// of a *StatusError. Upstream's agent treats a tool route's answer
	// this way: whatever the status, the body is the tool's output.
	AnyStatus bool
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
}

// Post sends req as JSON to rawURL (a RawJSON req is sent as it is, see
// RawJSON), with the call's cookies, and decodes a
// 2xx answer into resp (which may be nil). A non-2xx answer is a
// *StatusError unless call.AnyStatus is set. The reply carries the status
// and the cookies the answer set.
func (c *Client) Post(ctx context.Context, rawURL string, req, resp any, call Call) (reply Reply, err error) {
	tg, err := c.target(rawURL)
	if err != nil {
		return reply, fmt.Errorf("client: bad URL: %w", err)
	}
	body, err := encodeRequest(req)
	if err != nil {
		return reply, fmt.Errorf("client: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	var span trace.Span
	if lens.Enabled(telemetry.GroupHTTPClient) {
		ctx, span = lens.Start(ctx, telemetry.GroupHTTPClient, tg.spanName, startOptions(ctx)...)
		// Attributes after the start, from the target's cached list: the
		// tracer copies them once into the span, where as start options they
		// would be copied into the start config first. Nothing reads them in
		// between (see the ingress's SERVER spans).
		span.SetAttributes(tg.attrs...)
		defer func() {
			if status := StatusOf(err); status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", status))
			} else if reply.Status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", reply.Status))
			}
			if err != nil {
				span.SetAttributes(attribute.String("error.type", errorClass(err)))
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
	}

	var attempt int
	for {
		reply, err = c.once(ctx, tg, body, resp, call)
		if err == nil || !retryable(err) || attempt >= c.retries || ctx.Err() != nil {
			break
		}
		wait := c.backoff << attempt
		attempt++
		if span != nil {
			span.AddEvent("retry", trace.WithAttributes(attribute.Int("http.request.resend_count", attempt)))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return reply, fmt.Errorf("client: POST %s: %w (after %d attempts)", tg.safe, err, attempt)
		}
	}
	if span != nil && attempt > 0 {
		span.SetAttributes(attribute.Int("http.request.resend_count", attempt))
	}
	if err != nil {
		return reply, fmt.Errorf("client: POST %s: %w", tg.safe, err)
	}
	return reply, nil
}

// encodeRequest is req as a request body: a RawJSON as it is, anything
// else through encoding/json.
func encodeRequest(req any) ([]byte, error) {
	if raw, ok := req.(RawJSON); ok {
		return raw, nil
	}
	return json.Marshal(req)
}

// maxErrorBody bounds how much of a non-2xx body is kept.
const maxErrorBody = 4096

func (c *Client) once(ctx context.Context, tg *target, body []byte, resp any, call Call) (Reply, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.u.String(), bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	for _, ck := range call.Cookies {
		r.AddCookie(ck)
	}
	otel.GetTextMapPropagator().Inject(ctx, headerCarrier(r.Header))
	res, err := c.http.Do(r)
	if err != nil {
		// The transport's error repeats the full URL; keep the query out.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = tg.safe
		}
		return Reply{}, err
	}
	defer res.Body.Close()
	reply := Reply{Status: res.StatusCode, Cookies: res.Cookies(), Header: res.Header}
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
	if err := json.NewDecoder(res.Body).Decode(resp); err != nil {
		return reply, fmt.Errorf("decode response: %w", err)
	}
	return reply, nil
}

// retryable reports whether err means the request never reached the peer:
// a refused or failed dial.
func retryable(err error) bool {
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
	case retryable(err):
		return "connection_refused"
	}
	return "_OTHER"
}

func clientAttrs(u *url.URL) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("url.full", lens.SafeURL(u)),
		attribute.String("server.address", u.Hostname()),
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
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
