package server

import (
	"context"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/cowmap"
)

// This file decides which HTTP server metric conventions the ingress
// middleware follows, and builds (once per kind of request) the attribute
// sets for each of them. Python's ASGI instrumentation, which NeMo Gym's
// FastAPI servers run, reads OTEL_SEMCONV_STABILITY_OPT_IN as follows, and
// so does this file, so that one value of the variable gives a Go and a
// Python process the same series:
//
//   - the value is split on commas and each item trimmed of white space;
//     items are compared exactly (case matters);
//   - an item "http/dup" means old and new conventions, whatever else is
//     listed; otherwise an item "http" means the new ones only;
//   - a list naming neither means the old conventions only.
//
// The one difference: unset (or blank, which gymlens counts as unset for
// every setting), Python emits the old conventions and gymlens the new ones
// (the setting's default, "http"). Setting http/dup on every process gives
// a mixed fleet one shared set of series.

// Items of OTEL_SEMCONV_STABILITY_OPT_IN that concern HTTP.
const (
	semconvHTTP    = "http"
	semconvHTTPDup = "http/dup"
)

// httpConventions says which HTTP server metric conventions to emit.
type httpConventions struct {
	old bool // http.server.duration (ms) and the old attribute keys
	new bool // http.server.request.duration (s) and the stable keys
}

// parseSemconvOptIn reads a value of OTEL_SEMCONV_STABILITY_OPT_IN the way
// Python's instrumentation does (see the top of this file).
func parseSemconvOptIn(value string) httpConventions {
	var stable, dup bool
	for item := range strings.SplitSeq(value, ",") {
		switch strings.TrimSpace(item) {
		case semconvHTTPDup:
			dup = true
		case semconvHTTP:
			stable = true
		}
	}
	switch {
	case dup:
		return httpConventions{old: true, new: true}
	case stable:
		return httpConventions{new: true}
	}
	return httpConventions{old: true}
}

// conventionsOf returns the conventions cfg asks for. A configuration
// without the setting (one not built by lens.LoadConfig) gets the default.
func conventionsOf(cfg lens.Config) httpConventions {
	src, ok := cfg.Source(lens.KeySemconvStabilityOptIn)
	if !ok {
		return httpConventions{new: true}
	}
	return parseSemconvOptIn(src.Value)
}

// oldDurationMS is the value the old histogram records: whole milliseconds,
// rounded half to even as Python's round() does.
func oldDurationMS(seconds float64) float64 {
	return math.Max(math.RoundToEven(seconds*1000), 0)
}

// flavors are the HTTP versions as the metrics spell them (http.flavor and
// network.protocol.version): "1.1", "2", as an ASGI server reports them.
var flavors = [...]string{"1.1", "1.0", "2", contract.Other}

func flavorIndex(major, minor int) int {
	switch {
	case major == 1 && minor == 1:
		return 0
	case major == 1 && minor == 0:
		return 1
	case major == 2 && minor == 0:
		return 2
	}
	return len(flavors) - 1
}

// origin is what the old conventions say about where a request arrived:
// http.host (the local address, "ip:port", no port when it is 80, as the
// ASGI instrumentation spells its server address), net.host.port and
// http.server_name (the Host header). Each is left out when unknown.
type origin struct {
	id         uint32
	host       string
	port       int
	serverName string
}

// originKey is what an origin is built from.
type originKey struct {
	local netip.AddrPort
	host  string
}

// maxOrigins caps the distinct origins one server records; the Host header
// is client input. Past the cap, requests share overflowOrigin.
const maxOrigins = 64

// overflowOrigin stands for every origin past the cap.
var overflowOrigin = &origin{id: maxOrigins + 1, host: contract.Other, serverName: contract.Other}

// originTable interns origins: a warm lookup is a map read, no lock.
type originTable struct {
	m cowmap.Map[originKey, *origin]
}

func (o *originTable) lookup(r *http.Request) *origin {
	k := originKey{local: localAddr(r), host: r.Host}
	if v, ok := o.m.Load(k); ok {
		return v
	}
	return o.m.Get(k, func(n int) (*origin, bool) {
		if n >= maxOrigins {
			return overflowOrigin, false
		}
		v := &origin{id: uint32(n + 1), serverName: strings.Clone(r.Host)}
		if k.local.IsValid() {
			v.port = int(k.local.Port())
			v.host = k.local.Addr().String()
			if v.port != 80 {
				v.host += ":" + strconv.Itoa(v.port)
			}
		}
		return v, true
	})
}

// localAddr is the address the request's connection was accepted on; the
// zero AddrPort when the request did not come through an http.Server.
func localAddr(r *http.Request) netip.AddrPort {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if a == nil {
		return netip.AddrPort{}
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(a.Port))
}

// requestKind is everything a request's metric attributes depend on
// besides its status: the index of its method in methods, of its HTTP
// version in flavors, and its origin (nil unless the old conventions are
// on).
type requestKind struct {
	method int
	flavor int
	origin *origin
}

// key packs the kind, and a status, into a map key.
func (k requestKind) key(status int) uint64 {
	var id uint32
	if k.origin != nil {
		id = k.origin.id
	}
	return uint64(status)<<32 | uint64(id)<<16 | uint64(k.method)<<8 | uint64(k.flavor)
}

// durationSets are the duration histograms bound to the attribute sets
// of one kind of request and status: one per convention emitted (the
// other is the zero value, which records nothing), and the body size
// histograms, bound to the stable conventions' set, when recorded.
type durationSets struct {
	new lens.BoundHistogram[float64]
	old lens.BoundHistogram[float64]

	reqBody, respBody lens.BoundHistogram[int64]
}

// kindOf classifies r for the metrics.
func (in *ingress) kindOf(r *http.Request) requestKind {
	k := requestKind{method: in.methodIdx, flavor: flavorIndex(r.ProtoMajor, r.ProtoMinor)}
	if in.method == "" {
		k.method = methodIndex(r.Method)
	}
	if in.t.conv.old {
		k.origin = in.t.origins.lookup(r)
	}
	return k
}

// activeSet returns the http.server.active_requests count of one kind of
// request, found on the first request of the kind. The status is not known
// yet when a request starts, so it takes no part.
func (in *ingress) activeSet(k requestKind) *activeCount {
	key := k.key(0)
	if v, ok := in.active.Load(key); ok {
		return v
	}
	return in.active.Get(key, func(int) (*activeCount, bool) {
		conv, method := in.t.conv, methods[k.method]
		var attrs []attribute.KeyValue
		if conv.old {
			attrs = append(attrs,
				attribute.String(contract.AttrOldHTTPMethod, method),
				attribute.String(contract.AttrOldHTTPScheme, schemeHTTP),
				attribute.String(contract.AttrOldHTTPFlavor, flavors[k.flavor]))
			if o := k.origin; o != nil {
				if o.host != "" {
					attrs = append(attrs, attribute.String(contract.AttrOldHTTPHost, o.host))
				}
				if o.serverName != "" {
					attrs = append(attrs, attribute.String(contract.AttrOldHTTPServerName, o.serverName))
				}
			}
		}
		if conv.new {
			attrs = append(attrs,
				attribute.String(contract.AttrHTTPRequestMethod, method),
				attribute.String(contract.AttrURLScheme, schemeHTTP))
		}
		return in.t.active.count(attribute.NewSet(attrs...)), true
	})
}

// activeTable holds the requests in flight per attribute set, across the
// routes of a server (routes of one method share a set), for the
// observable http.server.active_requests.
type activeTable struct {
	mu sync.Mutex
	m  map[attribute.Distinct]*activeCount
}

// activeCount is the requests in flight of one attribute set.
type activeCount struct {
	n   atomic.Int64
	opt metric.ObserveOption
}

// count returns set's count, made on first use.
func (a *activeTable) count(set attribute.Set) *activeCount {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.m[set.Equivalent()]
	if !ok {
		c = &activeCount{opt: metric.WithAttributeSet(set)}
		a.m[set.Equivalent()] = c
	}
	return c
}

// observe reports every count; it runs at collection time.
func (a *activeTable) observe(_ context.Context, o metric.Int64Observer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.m {
		o.Observe(c.n.Load(), c.opt)
	}
	return nil
}

// durationSet returns the bound duration histograms for one kind of
// request and status, built on the first such request.
func (in *ingress) durationSet(k requestKind, status int) durationSets {
	key := k.key(status)
	if v, ok := in.durations.Load(key); ok {
		return v
	}
	return in.durations.Get(key, func(int) (durationSets, bool) {
		var s durationSets
		method, flavor := methods[k.method], flavors[k.flavor]
		if in.t.conv.new {
			attrs := []attribute.KeyValue{
				attribute.String(contract.AttrHTTPRequestMethod, method),
				attribute.Int(contract.AttrHTTPResponseStatus, status),
				attribute.String(contract.AttrURLScheme, schemeHTTP),
				attribute.String(contract.AttrNetworkProtocolVersion, flavor),
			}
			if in.route != "" {
				attrs = append(attrs, attribute.String(contract.AttrHTTPRoute, in.route))
			}
			if status >= 500 {
				attrs = append(attrs, attribute.String(contract.AttrErrorType, strconv.Itoa(status)))
			}
			set := attribute.NewSet(attrs...)
			s.new = in.t.duration.Bind(set)
			if in.t.bodySizes {
				s.reqBody, s.respBody = in.t.reqBody.Bind(set), in.t.respBody.Bind(set)
			}
		}
		if in.t.conv.old {
			attrs := []attribute.KeyValue{
				attribute.String(contract.AttrOldHTTPMethod, method),
				attribute.String(contract.AttrOldHTTPScheme, schemeHTTP),
				attribute.Int(contract.AttrOldHTTPStatusCode, status),
				attribute.String(contract.AttrOldHTTPFlavor, flavor),
			}
			if o := k.origin; o != nil {
				if o.host != "" {
					attrs = append(attrs, attribute.String(contract.AttrOldHTTPHost, o.host))
				}
				if o.serverName != "" {
					attrs = append(attrs, attribute.String(contract.AttrOldHTTPServerName, o.serverName))
				}
				if o.port != 0 {
					attrs = append(attrs, attribute.Int(contract.AttrOldNetHostPort, o.port))
				}
			}
			// The old conventions name the route template http.target on
			// this metric, and only when a route matched.
			if in.route != "" {
				attrs = append(attrs, attribute.String(contract.AttrOldHTTPTarget, in.route))
			}
			s.old = in.t.durationOld.Bind(attribute.NewSet(attrs...))
		}
		return s, true
	})
}
