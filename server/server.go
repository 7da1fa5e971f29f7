package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/protocol"
)

// DefaultMaxBodyBytes is the request body limit unless Options say
// otherwise.
const DefaultMaxBodyBytes = 8 << 20

// errHandlerPanicked answers a request whose handler panicked.
var errHandlerPanicked = errors.New("handler panicked")

// DefaultShutdownTimeout bounds how long Serve drains in-flight requests
// (contract.ServerDrainTimeout, which the orchestrator's stop bound counts).
const DefaultShutdownTimeout = contract.ServerDrainTimeout

// Options configure a Server.
type Options struct {
	// Name and Type identify the server in logs (telemetry takes them from
	// telemetry.Init).
	Name, Type string
	// Addr is the listen address; "" means 127.0.0.1:0 (a free loopback
	// port).
	Addr string
	// MaxBodyBytes limits request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// The limits below each take their default (the Default* constant of
	// the same name) when 0 and are off when negative; Settings is their
	// table, ApplyEnv sets them from the environment.

	// MaxDecodedBytes bounds a typed endpoint's body by the estimated
	// size of the Go values it decodes to (see decodeBudget): past it the
	// answer is 413 before anything is decoded.
	MaxDecodedBytes int64
	// ReadHeaderTimeout bounds reading a request's header.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, header and body; a body
	// still arriving then is answered 408 (or its connection closed). The
	// handler's time is not part of it.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing an answer from the moment the handler
	// has it; the handler's own time is never bounded.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may stay idle.
	IdleTimeout time.Duration
	// MaxHeaderBytes limits a request's header.
	MaxHeaderBytes int
	// MaxConns caps open connections, lowered to keep fdReserve file
	// descriptors free; at the cap the oldest connection not in a request
	// is closed for a new one, and when all are in a request the new one
	// gets a 503 and is closed.
	MaxConns int
	// MaxConcurrentRequests caps requests in progress, the liveness
	// routes not counted; past it the answer is 503 with Retry-After.
	MaxConcurrentRequests int
	// ShutdownTimeout bounds the drain on shutdown; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives the server's own logs; nil means slog.Default().
	Logger *slog.Logger
	// uninstrumented builds the handler without any ingress
	// instrumentation, whatever the process's telemetry: no SERVER spans,
	// no request-duration metric, no trace context taken from incoming
	// headers. It is the benchmarks' baseline (the same stack with the
	// instrumentation not installed) and no option for users: tests set it
	// through export_test.go, and a gym binary built with the gymbench tag
	// from the environment (see benchhook_on.go).
	uninstrumented bool
	// Middleware, when set, wraps the handler of every route but the
	// health check, inside the ingress instrumentation: its time is part
	// of the SERVER span and of the request-duration metric.
	Middleware func(http.Handler) http.Handler
	// RolloutPrefix says which leading /ng-rollout/<id> form is stripped
	// before routing (the id is then RolloutID(ctx)); PrefixNone keeps
	// paths as they come.
	RolloutPrefix PrefixMode
	// SessionCookie, when set, is the name of the session cookie: every
	// response sets it (Path=/, HttpOnly, SameSite=Lax, 14 days), keeping
	// the caller's session id when it sent a valid one and minting one
	// otherwise; handlers read it with SessionID(ctx).
	SessionCookie string
	// Reroute, when set, sees every request before the mux matches it
	// (its URL.Path decoded, as the request came) and returns the request
	// to route, its URL possibly rewritten, and true; false answers it
	// with the catch-all's 404. A server whose routes must match as a
	// Python server's do on the decoded path uses it where the mux's own
	// matching (escaped segments, cleaned paths) would differ.
	Reroute func(*http.Request) (*http.Request, bool)
}

// PrefixMode selects how a server strips the rollout-id path prefix.
type PrefixMode int

const (
	// PrefixNone routes paths as they come.
	PrefixNone PrefixMode = iota
	// PrefixResources strips /ng-rollout/<id> with a valid rollout id, as
	// upstream's resources servers do.
	PrefixResources
	// PrefixModel strips /ng-rollout/<id> and an optional
	// /training-token-capture, as upstream's model servers do.
	PrefixModel
)

// Server is one Gym server's HTTP side: a mux of typed endpoints plus the
// liveness routes GET / and GET /health, instrumented at ingress.
type Server struct {
	opts     Options
	log      *slog.Logger
	mu       sync.Mutex
	routes   []string
	handlers []http.Handler
	handler  http.Handler
	ln       net.Listener
	conns    *connLimiter
	inFlight atomic.Int64
	busyWarn warner
}

// New returns a server with its liveness routes, GET / and GET /health,
// registered; both answer {"status":"ok"}.
func New(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	opts.MaxDecodedBytes = orDefault(opts.MaxDecodedBytes, DefaultMaxDecodedBytes)
	opts.ReadHeaderTimeout = orDefault(opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	opts.ReadTimeout = orDefault(opts.ReadTimeout, DefaultReadTimeout)
	opts.WriteTimeout = orDefault(opts.WriteTimeout, DefaultWriteTimeout)
	opts.IdleTimeout = orDefault(opts.IdleTimeout, DefaultIdleTimeout)
	opts.MaxHeaderBytes = orDefault(opts.MaxHeaderBytes, DefaultMaxHeaderBytes)
	opts.MaxConns = orDefault(opts.MaxConns, DefaultMaxConns)
	opts.MaxConcurrentRequests = orDefault(opts.MaxConcurrentRequests, DefaultMaxConcurrentRequests)
	if benchUninstrumented {
		opts.uninstrumented = true
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{opts: opts, log: log.With("server", opts.Name)}
	live := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, protocol.LivenessBody)
	}
	s.HandleFunc("GET "+HealthPath, live)
	s.HandleFunc("GET "+livenessPattern, live)
	return s
}

// HandleFunc registers a plain handler under a method-qualified pattern
// such as "GET /health". A panic in it becomes a 500. Its write timeout
// (Options.WriteTimeout) starts when it starts its answer, as Handle's
// does: a handler may work as long as its work takes (a relay waits on a
// whole rollout) before it answers.
func (s *Server) HandleFunc(pattern string, h http.HandlerFunc) {
	s.register(pattern, func(w http.ResponseWriter, r *http.Request) {
		h(&answerDeadline{ResponseWriter: w, s: s}, r)
	})
}

// RouteOption changes how Handle serves one route.
type RouteOption func(*routeLimits)

// routeLimits are one route's body limit and decoded-size budget.
type routeLimits struct{ body, decoded int64 }

// BulkFactor is how many times the server's body limit and decoded-size
// budget a BulkBody route takes.
const BulkFactor = 64

// BulkBody is for a route whose body carries a whole run's records at
// once, as /aggregate_metrics takes every verify result of a collection
// in one request (upstream's collector sends them so, and its servers set
// no limit). Its body limit and decoded-size budget are BulkFactor times
// the server's (512 MiB and 8 GiB by default, room for hundreds of
// thousands of results), where the server's own budget stops such a body
// at a few thousand. A budget switched off stays off.
func BulkBody() RouteOption {
	return func(l *routeLimits) { l.body, l.decoded = scaleLimit(l.body), scaleLimit(l.decoded) }
}

// scaleLimit is n*BulkFactor, saturating; n <= 0 (off) stays as it is.
func scaleLimit(n int64) int64 {
	switch {
	case n <= 0:
		return n
	case n > math.MaxInt64/BulkFactor:
		return math.MaxInt64
	}
	return n * BulkFactor
}

// register adds a route whose handler starts its own write timeout.
func (s *Server) register(pattern string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handler != nil {
		panic("server: route " + pattern + " registered after the server started")
	}
	s.routes = append(s.routes, pattern)
	s.handlers = append(s.handlers, s.recoverer(h))
}

// Handle registers a typed JSON endpoint. The request body is decoded into
// Req: malformed JSON or a value of the wrong kind is a 422 with a
// FastAPI-shaped body naming the location, over the size limit a 413. If
// Req has a Validate() error method, a failure there is a 422 too (a
// *protocol.ValidationError keeps its locations, under "body"). fn's
// result is encoded as JSON with status 200 (a RawJSON result is written
// as it is); an *Error it returns sets the status, a
// *protocol.ValidationError gives 422, any other error or a panic gives
// 500.
//
// opts change the route's limits (BulkBody).
func Handle[Req, Resp any](s *Server, pattern string, fn func(context.Context, Req) (Resp, error), opts ...RouteOption) {
	l := routeLimits{body: s.opts.MaxBodyBytes, decoded: s.opts.MaxDecodedBytes}
	for _, o := range opts {
		o(&l)
	}
	limit, budget := l.body, l.decoded
	s.register(pattern, func(w http.ResponseWriter, r *http.Request) {
		req, ok := decodeRequest[Req](s, w, r, limit, budget)
		if !ok {
			return
		}
		resp, err := fn(context.WithValue(r.Context(), exchangeKey{}, &exchange{header: w.Header(), req: r}), req)
		s.setWriteDeadline(w)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

type exchangeKey struct{}

// exchange is what a typed handler may need of the HTTP exchange it
// answers, besides its decoded body.
type exchange struct {
	header http.Header
	req    *http.Request
}

// ResponseHeader returns the header of the response a typed handler
// (Handle) is answering, so it can set members before its result is
// written; nil outside such a handler.
func ResponseHeader(ctx context.Context) http.Header {
	if x, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		return x.header
	}
	return nil
}

// Request returns the request a typed handler (Handle) is answering, for
// its cookies and path values (its body is already consumed); nil outside
// such a handler.
func Request(ctx context.Context) *http.Request {
	if x, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		return x.req
	}
	return nil
}

func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panicked", "route", r.Pattern, "panic", v, "stack", string(debug.Stack()))
				s.setWriteDeadline(w)
				writeError(w, errHandlerPanicked)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// Handler returns the complete, instrumented handler. It is built on the
// first call, from the telemetry this process has then; registering routes
// afterwards panics.
func (s *Server) Handler() http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handler == nil {
		s.handler = s.build()
	}
	return s.handler
}

// observation reports whether pattern is a route that looks at the
// server rather than serving the fleet's work: the health checks and
// gymlens's own routes (contract.RoutePrefix), polled every second or so.
// They are answered outside the ingress telemetry, the middleware and the
// request cap, so that watching a server neither shows in its request
// metrics and traces nor waits behind its work.
func observation(pattern string) bool {
	path := pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		path = p
	}
	return pattern == "GET "+HealthPath || pattern == "GET "+livenessPattern || strings.HasPrefix(path, contract.RoutePrefix)
}

// build wires every route, each behind its own ingress instrumentation
// (none for an uninstrumented benchmark baseline), and a catch-all that
// answers 404 for everything else.
func (s *Server) build() http.Handler {
	wrap := func(_ string, h http.Handler) http.Handler { return h }
	if !s.opts.uninstrumented {
		wrap = newIngressTelemetry(s.log).wrap
	}
	mux := http.NewServeMux()
	for i, pattern := range s.routes {
		h := s.handlers[i]
		if !observation(pattern) {
			if s.opts.Middleware != nil {
				// The route's own recoverer sits inside the middleware;
				// this one answers 500 for a panic in the middleware.
				h = s.recoverer(s.opts.Middleware(h))
			}
			if s.opts.MaxConcurrentRequests > 0 {
				h = s.limitRequests(h)
			}
			h = wrap(pattern, h)
		}
		mux.Handle(pattern, h)
	}
	notFound := wrap("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.setWriteDeadline(w)
		writeJSON(w, http.StatusNotFound, protocol.NotFoundBody)
	}))
	mux.Handle("/", notFound)
	var h http.Handler = mux
	if reroute := s.opts.Reroute; reroute != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r2, ok := reroute(r); ok {
				mux.ServeHTTP(w, r2)
			} else {
				notFound.ServeHTTP(w, r)
			}
		})
	}
	if s.opts.SessionCookie != "" {
		h = sessions(s.opts.SessionCookie, h)
	}
	if s.opts.RolloutPrefix != PrefixNone {
		h = stripRolloutPrefix(s.opts.RolloutPrefix, h)
	}
	return s.clearWriteDeadline(h)
}

// Listen binds the listen address and returns the bound address. An
// address with an empty host (":0") binds loopback (contract.ListenAddr),
// never every interface.
func (s *Server) Listen() (net.Addr, error) {
	addr, err := contract.ListenAddr(s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.opts.Name, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server %s: listen %s: %w", s.opts.Name, addr, err)
	}
	s.mu.Lock()
	s.ln = ln
	if s.opts.MaxConns > 0 {
		limit := connCap(s.opts.MaxConns, fileLimit())
		if limit < s.opts.MaxConns {
			s.log.Info("connection cap lowered to leave file descriptors free", "max_conns", s.opts.MaxConns, "cap", limit, "nofile", fileLimit())
		}
		s.conns = &connLimiter{max: limit, log: s.log}
	}
	s.mu.Unlock()
	return ln.Addr(), nil
}

// Serve serves until ctx is done, then stops accepting, drains in-flight
// requests for up to the shutdown timeout and returns. It calls Listen
// first if nobody did. Flushing telemetry is the caller's next step.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
		s.mu.Lock()
		ln = s.ln
		s.mu.Unlock()
	}
	s.mu.Lock()
	conns := s.conns
	s.mu.Unlock()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		// net/http lifts this deadline once a body has been read, so it
		// bounds reading the request and never the handler.
		ReadTimeout:    s.opts.ReadTimeout,
		IdleTimeout:    s.opts.IdleTimeout,
		MaxHeaderBytes: s.opts.MaxHeaderBytes,
		// No WriteTimeout: net/http would start it with the request and
		// cut a slow handler's answer; setWriteDeadline starts it when the
		// answer is ready.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if s.opts.IdleTimeout == 0 {
		// 0 would fall back on ReadTimeout; a negative one is none.
		srv.IdleTimeout = -1
	}
	fresh := &freshConns{}
	srv.ConnState = fresh.connState
	if conns != nil {
		ln = &limitedListener{Listener: ln, l: conns}
		srv.ConnState = func(c net.Conn, st http.ConnState) {
			fresh.connState(c, st)
			conns.connState(c, st)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("server %s: %w", s.opts.Name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	// net/http waits 5 s for a connection that has sent no request yet
	// before it counts it idle: a client's spare (its transport dials one
	// for a request another connection then took) held every stop up by
	// that much. Such connections are closed as soon as the drain begins,
	// and again while it lasts, as a closed listener would have refused
	// them; a request whose handler runs is never cut.
	fresh.closeAll()
	tick := time.NewTicker(freshCloseInterval)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-shut:
			break wait
		case <-tick.C:
			fresh.closeAll()
		}
	}
	<-errc
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("server %s: drain: %w", s.opts.Name, err)
	}
	return nil
}

// freshCloseInterval is how often a draining server closes the
// connections that have sent no request.
const freshCloseInterval = 50 * time.Millisecond

// freshConns tracks the connections in http.StateNew: accepted, no
// request read from them yet. Its hook runs on every request's state
// changes, so it keeps no lock of its own there: an idle transition is
// ignored, and deleting a connection that is not in the map is a lookup.
type freshConns struct{ m sync.Map }

// connState is an http.Server ConnState hook.
func (f *freshConns) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		f.m.Store(c, struct{}{})
	case http.StateIdle:
	default:
		f.m.Delete(c)
	}
}

// closeAll closes every connection still in http.StateNew.
func (f *freshConns) closeAll() {
	f.m.Range(func(k, _ any) bool {
		_ = k.(net.Conn).Close()
		f.m.Delete(k)
		return true
	})
}

func decode(w http.ResponseWriter, r *http.Request, limit, budget int64, dst any) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	var dec *json.Decoder
	if budget > 0 {
		dec = json.NewDecoder(&decodeBudget{r: body, limit: budget})
	} else {
		dec = json.NewDecoder(body)
	}
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	// Nothing but whitespace may follow the object; reading one more token
	// also drains the body, so an oversized tail is still caught.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var maxErr *http.MaxBytesError
		var sizeErr *DecodedSizeError
		var netErr net.Error
		if errors.As(err, &maxErr) || errors.As(err, &sizeErr) || errors.As(err, &netErr) {
			return decodeError(err)
		}
		return &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrJSONInvalid,
			Loc: []any{"body", int(dec.InputOffset())}, Msg: "JSON decode error", Input: json.RawMessage("{}")}}}
	}
	return nil
}

func decodeError(err error) error {
	var maxErr *http.MaxBytesError
	var sizeErr *DecodedSizeError
	var netErr net.Error
	switch {
	case errors.As(err, &maxErr):
		return Errorf(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", maxErr.Limit)
	case errors.As(err, &sizeErr):
		return Errorf(http.StatusRequestEntityTooLarge, "%s", sizeErr.Error())
	case errors.As(err, &netErr) && netErr.Timeout():
		return Errorf(http.StatusRequestTimeout, "request body not read within the read timeout")
	}
	return protocol.DecodeError(err, "body")
}

func writeError(w http.ResponseWriter, err error) {
	status, body := errorBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// RawJSON is a body that is already encoded: a typed handler (Handle)
// returning one has its bytes written as they are, and Client.Post sends
// a RawJSON request as it is, with no encoding, compacting or checking,
// so code that passes a peer's answer on, or encodes a protocol value
// with its own MarshalJSON, pays no second pass over it. It must hold one
// valid JSON value; the runtime trusts it. A *RawJSON given to a Client
// call for the answer takes the answer's bytes as they came, unchecked. (A json.RawMessage, by
// contrast, is encoded: encoding/json checks and compacts it, one more
// scan of the bytes, as it does the output of every MarshalJSON method.)
type RawJSON []byte

func writeJSON(w http.ResponseWriter, status int, v any) {
	if st, ok := v.(Streamed); ok {
		WriteStreamed(w, st)
		return
	}
	if raw, ok := v.(RawJSON); ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(raw)
		return
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		b, _ := json.Marshal("encode response: " + err.Error())
		buf.Write(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decodeRequest decodes r's body into a Req within the route's limits
// and runs its Validate method when it has one; on failure it answers
// the error itself (422 as upstream's FastAPI does, 413, 400) and
// reports false.
func decodeRequest[Req any](s *Server, w http.ResponseWriter, r *http.Request, limit, budget int64) (Req, bool) {
	var req Req
	err := decode(w, r, limit, budget, &req)
	if v, ok := any(&req).(interface{ Validate() error }); ok && err == nil {
		if verr := v.Validate(); verr != nil {
			err = protocol.DecodeError(verr, "body")
		}
	}
	if err != nil {
		s.setWriteDeadline(w)
		writeError(w, err)
		return req, false
	}
	return req, true
}
