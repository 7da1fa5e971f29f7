package environment

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gymlens/gymlens/server"
)

// Bounds of a Sessions store whose fields are left zero.
const (
	// DefaultSessionTTL is how long a session may sit unused before it is
	// dropped: far longer than the pause between two steps of a rollout
	// (a model turn), far shorter than a training run.
	DefaultSessionTTL = time.Hour
	// DefaultMaxSessions is how many sessions a store keeps at most:
	// well above the rollouts one resources server runs at a time.
	DefaultMaxSessions = 100_000
)

// ErrNoSession is returned by Sessions.Set and Sessions.Update for a
// request that has no session id: the server was not built with the
// session cookie (use ServerOptions), or ctx is not a
// request's.
var ErrNoSession = errors.New("environment: the request has no session (build the server with environment.ServerOptions)")

// Sessions keeps one state of type S per session, the rollout a session
// cookie names (server.SessionID): the seed function (Seed) creates it,
// tools and the verify function read and change it.
//
// The store is bounded. A session that no call has used (Get, Set or
// Update) for longer than TTL is dropped, and creating a session beyond
// MaxSessions drops the least recently used one; a dropped session reads
// as absent, as one that was never seeded. Expired sessions are dropped
// as new ones are created, with no goroutine of its own.
//
// States are values: Get returns a copy and Update changes a copy that
// replaces the state, so S should be a plain value (maps, slices and
// pointers inside it are shared between copies, and guarding them is up
// to S). Calls for one session are serialized by Update; calls for
// different sessions run in parallel.
//
// The zero value is ready to use, with the default bounds. TTL and
// MaxSessions must not change after the first call. A Sessions must not
// be copied after first use.
type Sessions[S any] struct {
	// TTL is the idle time after which a session is dropped; 0 means
	// DefaultSessionTTL.
	TTL time.Duration
	// MaxSessions caps the number of sessions kept; 0 means
	// DefaultMaxSessions.
	MaxSessions int

	mu    sync.Mutex
	byID  map[string]*list.Element // of *session[S]
	order list.List                // most recently used first
	now   func() time.Time         // for tests; nil means time.Now
}

// session is one entry of a store.
type session[S any] struct {
	id   string
	used time.Time // last use; guarded by the store's mu
	mu   sync.Mutex
	v    S
}

func (s *Sessions[S]) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *Sessions[S]) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultSessionTTL
}

func (s *Sessions[S]) limit() int {
	if s.MaxSessions > 0 {
		return s.MaxSessions
	}
	return DefaultMaxSessions
}

// lookup returns the live session id, marking it used, or creates it when
// create is set. The caller holds s.mu.
func (s *Sessions[S]) lookup(id string, create bool) (*session[S], bool) {
	now := s.clock()
	if el, ok := s.byID[id]; ok {
		e := el.Value.(*session[S])
		if now.Sub(e.used) <= s.ttl() {
			e.used = now
			s.order.MoveToFront(el)
			return e, true
		}
		s.order.Remove(el)
		delete(s.byID, id)
	}
	if !create {
		return nil, false
	}
	s.evict(now)
	if s.byID == nil {
		s.byID = map[string]*list.Element{}
	}
	e := &session[S]{id: id, used: now}
	s.byID[id] = s.order.PushFront(e)
	return e, false
}

// evict drops expired sessions, then least recently used ones until
// there is room for one more. The caller holds s.mu.
func (s *Sessions[S]) evict(now time.Time) {
	ttl, limit := s.ttl(), s.limit()
	for el := s.order.Back(); el != nil; el = s.order.Back() {
		e := el.Value.(*session[S])
		if now.Sub(e.used) <= ttl && s.order.Len() < limit {
			return
		}
		s.order.Remove(el)
		delete(s.byID, e.id)
	}
}

// Get returns a copy of the state of ctx's session, and whether it has
// one.
func (s *Sessions[S]) Get(ctx context.Context) (S, bool) {
	var zero S
	id := server.SessionID(ctx)
	if id == "" {
		return zero, false
	}
	s.mu.Lock()
	e, ok := s.lookup(id, false)
	s.mu.Unlock()
	if !ok {
		return zero, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.v, true
}

// Set stores v as the state of ctx's session, creating the session if
// needed.
func (s *Sessions[S]) Set(ctx context.Context, v S) error {
	id := server.SessionID(ctx)
	if id == "" {
		return ErrNoSession
	}
	s.mu.Lock()
	e, _ := s.lookup(id, true)
	s.mu.Unlock()
	e.mu.Lock()
	e.v = v
	e.mu.Unlock()
	return nil
}

// Update calls fn with a copy of the state of ctx's session and whether
// the session existed (if not, the copy is S's zero value), and stores
// the copy as the session's state when fn returns nil; fn's error is
// returned and changes nothing. Updates of one session run one at a
// time. Like Set, Update creates the session; to act only on a seeded
// session, return an error from fn when it is told the session is new.
func (s *Sessions[S]) Update(ctx context.Context, fn func(state *S, existed bool) error) error {
	id := server.SessionID(ctx)
	if id == "" {
		return ErrNoSession
	}
	s.mu.Lock()
	e, existed := s.lookup(id, true)
	s.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.v
	if err := fn(&v, existed); err != nil {
		if !existed {
			s.drop(e)
		}
		return err
	}
	e.v = v
	return nil
}

// drop removes e if it is still the entry of its id.
func (s *Sessions[S]) drop(e *session[S]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.byID[e.id]; ok && el.Value.(*session[S]) == e {
		s.order.Remove(el)
		delete(s.byID, e.id)
	}
}

// Delete drops ctx's session, if it has one.
func (s *Sessions[S]) Delete(ctx context.Context) {
	id := server.SessionID(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.byID[id]; ok {
		s.order.Remove(el)
		delete(s.byID, id)
	}
}

// Len returns the number of sessions kept, expired ones not counted.
func (s *Sessions[S]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, ttl := s.clock(), s.ttl()
	n := 0
	for el := s.order.Front(); el != nil; el = el.Next() {
		if now.Sub(el.Value.(*session[S]).used) > ttl {
			break // older ones follow
		}
		n++
	}
	return n
}
