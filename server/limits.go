package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of the limits in Options. Each applies when its Options field
// is 0; a negative field switches that limit off.
const (
	// DefaultReadHeaderTimeout bounds reading a request's header.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, header and body,
	// from its first byte: a body dripped byte by byte is cut here. The
	// handler's own time is not part of it (net/http lifts the read
	// deadline once the body has been read).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds writing an answer, from the moment the
	// handler has it: a caller that stops reading cannot hold the
	// server's goroutine and buffers. It does not bound the handler, so a
	// model call that takes minutes is answered.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may sit
	// between requests. It stays above every caller's own keep-alive, so
	// a caller closes an idle connection before the server does and never
	// sends on one being closed: NeMo Gym's aiohttp callers keep 15 s,
	// uvicorn servers 30 s, this package's Client clientIdleConnTimeout.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes limits a request's header (uvicorn's h11
	// accepts 16 KiB; this leaves room for large baggage).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConns caps open connections (further lowered to leave fd
	// headroom, see connCap). Past the cap the oldest connection that is
	// not in a request is closed to admit the new one; only when every
	// connection is in a request is the new one answered 503 and closed.
	DefaultMaxConns = 4096
	// DefaultMaxConcurrentRequests caps requests in progress (the liveness
	// routes not counted); past it a request is answered 503 with
	// Retry-After. It is twice what one NeMo Gym caller sends a server at
	// most (aiohttp's 1 024 connections per host), so only several busy
	// callers together, or a flood, reach it.
	DefaultMaxConcurrentRequests = 2048
	// DefaultMaxDecodedBytes bounds the estimated size of a decoded
	// request body (see decodeBudget); past it the answer is 413.
	DefaultMaxDecodedBytes = 128 << 20
)

// clientIdleConnTimeout is how long Client keeps an idle connection: half
// the servers' idle timeout, so a pooled connection is never one the
// server is closing.
const clientIdleConnTimeout = DefaultIdleTimeout / 2

// retryAfterSeconds is the Retry-After of a 503 for a full server.
const retryAfterSeconds = "1"

// fdReserve is how many file descriptors the connection cap leaves for
// everything else a server opens (peer connections, logs, telemetry), at
// most half the limit.
const fdReserve = 1024

// warnEvery is the least time between two warnings of one kind (refused
// connections, accept errors, busy answers); the ones in between are
// counted in the next.
const warnEvery = 10 * time.Second

// EnvPrefix starts the name of every environment variable of the
// settings table (Settings).
const EnvPrefix = "GYM_SERVER_"

// Setting is one row of the server limits table: its environment
// variable (EnvPrefix+Key), its default and how it is applied to Options.
type Setting struct {
	// Key is the variable's name after EnvPrefix.
	Key string
	// Default is the default, as the variable would write it.
	Default string
	// Doc says what the setting bounds.
	Doc string
	// apply parses v and sets it on o.
	apply func(o *Options, v string) error
}

// Settings is the one table of the runtime's limits: every Options limit,
// its variable and default. ApplyEnv reads it; docs/performance.md lists
// it. A duration takes Go's syntax ("30s", "2m"), a size or count a whole
// number; "off" switches a limit off (not the body limit).
var Settings = []Setting{
	{"MAX_BODY_BYTES", strconv.Itoa(DefaultMaxBodyBytes), "request body limit in bytes (413 past it)",
		sizeSetting(func(o *Options) *int64 { return &o.MaxBodyBytes }, false)},
	{"MAX_DECODED_BYTES", strconv.Itoa(DefaultMaxDecodedBytes), "estimated decoded size of a body in bytes (413 past it)",
		sizeSetting(func(o *Options) *int64 { return &o.MaxDecodedBytes }, true)},
	{"READ_HEADER_TIMEOUT", DefaultReadHeaderTimeout.String(), "time to read a request's header",
		durationSetting(func(o *Options) *time.Duration { return &o.ReadHeaderTimeout })},
	{"READ_TIMEOUT", DefaultReadTimeout.String(), "time to read a whole request, header and body (not the handler's time)",
		durationSetting(func(o *Options) *time.Duration { return &o.ReadTimeout })},
	{"WRITE_TIMEOUT", DefaultWriteTimeout.String(), "time to write an answer once the handler has it (not the handler's time)",
		durationSetting(func(o *Options) *time.Duration { return &o.WriteTimeout })},
	{"IDLE_TIMEOUT", DefaultIdleTimeout.String(), "time a keep-alive connection may sit idle (keep it above 30s)",
		durationSetting(func(o *Options) *time.Duration { return &o.IdleTimeout })},
	{"MAX_HEADER_BYTES", strconv.Itoa(DefaultMaxHeaderBytes), "request header limit in bytes (431 past it)",
		intSetting(func(o *Options) *int { return &o.MaxHeaderBytes })},
	{"MAX_CONNS", strconv.Itoa(DefaultMaxConns), "open connections (idle ones closed first; 503 when all are busy)",
		intSetting(func(o *Options) *int { return &o.MaxConns })},
	{"MAX_CONCURRENT_REQUESTS", strconv.Itoa(DefaultMaxConcurrentRequests), "requests in progress (503 with Retry-After past it)",
		intSetting(func(o *Options) *int { return &o.MaxConcurrentRequests })},
}

// ApplyEnv sets on opts every limit whose variable (EnvPrefix+Key of a
// Settings row) lookup finds set and not empty. An error names the
// variable, the value and what is accepted; callers treat it as a usage
// error, before anything listens.
func ApplyEnv(opts *Options, lookup func(string) (string, bool)) error {
	for _, s := range Settings {
		v, ok := lookup(EnvPrefix + s.Key)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			continue
		}
		if err := s.apply(opts, v); err != nil {
			return fmt.Errorf("%s%s=%q: %w", EnvPrefix, s.Key, v, err)
		}
	}
	return nil
}

func sizeSetting(field func(*Options) *int64, mayBeOff bool) func(*Options, string) error {
	return func(o *Options, v string) error {
		if v == "off" && mayBeOff {
			*field(o) = -1
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			if mayBeOff {
				return fmt.Errorf("want a whole number of bytes above 0, or off")
			}
			return fmt.Errorf("want a whole number of bytes above 0")
		}
		*field(o) = n
		return nil
	}
}

func intSetting(field func(*Options) *int) func(*Options, string) error {
	return func(o *Options, v string) error {
		if v == "off" {
			*field(o) = -1
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a whole number above 0, or off")
		}
		*field(o) = n
		return nil
	}
}

func durationSetting(field func(*Options) *time.Duration) func(*Options, string) error {
	return func(o *Options, v string) error {
		if v == "off" {
			*field(o) = -1
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a duration above 0 such as 30s or 2m, or off")
		}
		*field(o) = d
		return nil
	}
}

// orDefault resolves a limit field: 0 means def, negative means off (0).
func orDefault[T int | int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// connCap lowers want so that the connections a server holds never reach
// the file descriptor limit nofile: fdReserve descriptors (at most half of
// nofile) stay free. nofile 0 means unknown and leaves want as it is.
func connCap(want int, nofile uint64) int {
	if nofile == 0 || want <= 0 {
		return want
	}
	reserve := uint64(fdReserve)
	if reserve > nofile/2 {
		reserve = nofile / 2
	}
	if room := nofile - reserve; uint64(want) > room {
		return max(int(room), 1)
	}
	return want
}

// fileLimit returns this process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start-up), or 0.
func fileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// warner logs one kind of warning at most once per warnEvery, with the
// number of occurrences since the last line.
type warner struct {
	mu     sync.Mutex
	last   time.Time
	missed int
}

func (w *warner) warn(log *slog.Logger, msg string, args ...any) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < warnEvery {
		w.missed++
		w.mu.Unlock()
		return
	}
	missed := w.missed
	w.last, w.missed = now, 0
	w.mu.Unlock()
	log.Warn(msg, append(args, "since_last_warning", missed)...)
}

// connLimiter holds a server's open connections under a cap. Connections
// that are not in a request (new ones that have not sent a full header,
// keep-alive ones between requests) sit on a list, oldest first; a
// connection arriving at the cap closes the oldest of them, so idle
// connections can never lock out a caller with work. When every
// connection is in a request the new one is answered 503 and closed at
// once: it never waits in the accept queue, and descriptors stay below
// the cap.
type connLimiter struct {
	max int
	log *slog.Logger

	mu         sync.Mutex
	open       int
	head, tail *limitedConn // connections not in a request, oldest first

	refusedWarn, acceptWarn warner
	refused, evicted        atomic.Int64
}

// limitedListener admits accepted connections through a connLimiter.
type limitedListener struct {
	net.Listener
	l *connLimiter
}

// refusedResponse answers a connection over the cap when every admitted
// connection is in a request.
var refusedResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: " + retryAfterSeconds +
	"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(refusedBody)) + "\r\n\r\n" + refusedBody)

// refusedBody is refusedResponse's body, FastAPI's {"detail": ...} shape.
const refusedBody = `{"detail":"server at its connection cap; retry"}`

// refusedWriteTimeout bounds writing refusedResponse to a new connection
// (its send buffer is empty, so the write does not wait in practice).
const refusedWriteTimeout = 100 * time.Millisecond

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			if !isClosed(err) {
				ln.l.acceptWarn.warn(ln.l.log, "accept failed; retrying", "err", err)
			}
			return nil, err
		}
		if lc := ln.l.admit(c); lc != nil {
			return lc, nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(refusedWriteTimeout))
		_, _ = c.Write(refusedResponse)
		_ = c.Close()
		n := ln.l.refused.Add(1)
		ln.l.refusedWarn.warn(ln.l.log, "connection refused: every connection is in a request", "max_conns", ln.l.max, "refused_total", n)
	}
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed)
}

// admit wraps c when there is room, closing the oldest connection not in
// a request to make room at the cap; nil means refuse c.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	var victim *limitedConn
	if l.open >= l.max {
		victim = l.head
		if victim == nil {
			l.mu.Unlock()
			return nil
		}
		l.unlink(victim)
	}
	l.open++
	l.push(lc)
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		_ = victim.Close()
	}
	return lc
}

// push appends c to the list of connections not in a request; l.mu held.
func (l *connLimiter) push(c *limitedConn) {
	if c.listed || c.closed {
		return
	}
	c.listed, c.prev, c.next = true, l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

// unlink takes c off the list; l.mu held.
func (l *connLimiter) unlink(c *limitedConn) {
	if !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.listed, c.prev, c.next = false, nil, nil
}

// connState is the http.Server's ConnState hook: a connection is on the
// list while it is not in a request.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	switch st {
	case http.StateIdle:
		l.push(lc)
	case http.StateActive, http.StateHijacked, http.StateClosed:
		l.unlink(lc)
	}
	l.mu.Unlock()
}

// Open returns how many connections are admitted and not yet closed.
func (l *connLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// limitedConn is an admitted connection; closing it frees its place.
type limitedConn struct {
	net.Conn
	l          *connLimiter
	prev, next *limitedConn
	listed     bool // on l's list; guarded by l.mu
	closed     bool // guarded by l.mu
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	if c.closed {
		c.l.mu.Unlock()
		return nil
	}
	c.closed = true
	c.l.unlink(c)
	c.l.open--
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does before closing
// one it answered with an error.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// limitRequests answers 503 with Retry-After once max requests are in
// progress on the server: one atomic add on the way in and one out.
func (s *Server) limitRequests(h http.Handler) http.Handler {
	limit := int64(s.opts.MaxConcurrentRequests)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := s.inFlight.Add(1); n > limit {
			s.inFlight.Add(-1)
			s.busyWarn.warn(s.log, "request refused: server at its concurrent-request cap", "max_concurrent_requests", limit)
			w.Header().Set("Retry-After", retryAfterSeconds)
			s.setWriteDeadline(w)
			writeError(w, Errorf(http.StatusServiceUnavailable, "server busy: %d requests in progress; retry", limit))
			return
		}
		defer s.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// setWriteDeadline starts the write timeout of the answer w is about to
// carry.
func (s *Server) setWriteDeadline(w http.ResponseWriter) {
	if s.opts.WriteTimeout > 0 {
		writeDeadline(w, time.Now().Add(s.opts.WriteTimeout))
	}
}

// clearWriteDeadline lifts a write deadline an earlier answer on the same
// connection left, so code that writes without setWriteDeadline (a
// middleware, net/http itself) is not cut by it.
func (s *Server) clearWriteDeadline(h http.Handler) http.Handler {
	if s.opts.WriteTimeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeDeadline(w, time.Time{})
		h.ServeHTTP(w, r)
	})
}

// writeDeadline sets the write deadline of w's connection, looking
// through wrappers as http.ResponseController does, without allocating
// one per call; a writer with no connection (a test recorder) is left
// alone.
func writeDeadline(w http.ResponseWriter, t time.Time) {
	for {
		switch x := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			_ = x.SetWriteDeadline(t)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}
