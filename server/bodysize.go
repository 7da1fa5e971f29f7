package server

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/lens/cowmap"
	"github.com/gymlens/gymlens/telemetry"
)

// This file holds the client side of the HTTP body size histograms
// (http.client.request.body.size, http.client.response.body.size), which
// lens's HTTPBodySizes switches on; the server side is in instrument.go.
// Off, a call pays one atomic load (telemetry.Recording) and, with
// metrics exported, two more and a comparison: no body is wrapped.

// clientSizes are a Client's body size histograms in one telemetry
// set-up, and the attribute sets they are bound to, per peer and outcome.
type clientSizes struct {
	h         *lens.Handle // the set-up they belong to
	on        bool         // the sizes are recorded
	req, resp lens.Histogram[int64]
	sets      cowmap.Map[clientSizeKey, clientSizeSets]
}

// clientSizeKey is what an attempt's attribute set is made of besides
// the method, which is always POST.
type clientSizeKey struct {
	host    string // server.address and server.port, as target.host
	status  int    // http.response.status_code; 0 when no answer came
	flavor  int    // network.protocol.version, as an index in flavors; -1 when no answer came
	errType string // error.type, "" for none
}

// clientSizeSets are the two histograms bound to one attribute set.
type clientSizeSets struct {
	req, resp lens.BoundHistogram[int64]
}

// maxClientSizeSets caps the attribute sets a Client keeps bound; past it
// an attempt binds its set anew (a hash), which only a client calling
// hundreds of peers, or getting hundreds of statuses, pays.
const maxClientSizeSets = 256

// bodySizes returns the client's body size histograms in the current
// telemetry set-up, or nil when they are not recorded.
func (c *Client) bodySizes() *clientSizes {
	if !telemetry.Recording() {
		return nil
	}
	h := telemetry.Get()
	s := c.sizes.Load()
	if s == nil || s.h != h {
		s = newClientSizes(h)
		c.sizes.Store(s)
	}
	if !s.on {
		return nil
	}
	return s
}

// newClientSizes creates the histograms in h when its configuration asks
// for them.
func newClientSizes(h *lens.Handle) *clientSizes {
	s := &clientSizes{h: h}
	if !h.MetricsExporting() || !h.Config().HTTPBodySizes {
		return s
	}
	ins := h.Instrumenter()
	var err error
	if s.req, err = ins.Int64Histogram(contract.HTTPClientRequestBodySize); err != nil {
		return s
	}
	if s.resp, err = ins.Int64Histogram(contract.HTTPClientResponseBodySize); err != nil {
		return s
	}
	s.on = true
	return s
}

// sizeCount is one attempt's counted bodies.
type sizeCount struct {
	// sent counts a streamed request body (nil for one held in memory, or
	// for none).
	sent *countedBody
	// length is the length of a request body held in memory, which the
	// transport writes whole or fails the request (net/http refuses a
	// body shorter or longer than its ContentLength); -1 otherwise.
	length  int64
	wroteOK atomic.Bool   // the transport reported the request written
	state   atomic.Uint32 // attemptEnded, writeReported, sentRecorded
	sets    clientSizeSets
	read    *drainedBody // nil until an answer came
	flavor  int          // the answer's HTTP version, an index in flavors
}

// Bits of sizeCount.state.
const (
	attemptEnded  = 1 << iota // the attempt returned; sets is set
	writeReported             // the transport reported the request written, or failed
	sentRecorded              // the request body size is recorded
)

// attempt prepares r for counting its body. A body held in memory (what
// the fleet client sends) is not wrapped: net/http sends the headers of
// any other body in a TCP packet of their own (transfer.go's
// isKnownInMemoryReader, Go issue 22088), which measured 20 % more per
// loopback call. Its size is its length once the transport reports the
// request written (httptrace's WroteRequest). Any other body is wrapped
// and its bytes counted as the transport reads them; no body
// (http.NoBody) is 0.
func (s *clientSizes) attempt(r *http.Request) (*http.Request, *sizeCount) {
	c := &sizeCount{flavor: -1, length: -1}
	switch {
	case r.Body == nil || r.Body == http.NoBody:
	case r.GetBody != nil && r.ContentLength > 0:
		// http.NewRequest sets GetBody for the in-memory readers only.
		c.length = r.ContentLength
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{WroteRequest: c.wrote}))
	default:
		c.sent = &countedBody{ReadCloser: r.Body}
		r.Body = c.sent
	}
	return r, c
}

// wrote is the transport's report that it wrote the request (or failed
// to). It runs on the transport's writing goroutine, possibly after the
// attempt returned (an answer may come before the write is reported);
// whichever of the two comes last records the request body size.
func (c *sizeCount) wrote(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		c.wroteOK.Store(true)
	}
	if c.state.Or(writeReported)&attemptEnded != 0 {
		c.recordSent()
	}
}

// ended marks the attempt returned, with c.sets set: the request body
// size is recorded now when the write was reported or the attempt failed
// (a failed attempt may never be written; one whose write is not
// reported yet counts 0), else when the write is reported.
func (c *sizeCount) ended(failed bool) {
	if c.state.Or(attemptEnded)&writeReported != 0 || failed {
		c.recordSent()
	}
}

// recordSent records the request body size, once.
func (c *sizeCount) recordSent() {
	if c.state.Or(sentRecorded)&sentRecorded != 0 {
		return
	}
	var n int64
	if c.wroteOK.Load() {
		n = c.length
	}
	c.sets.req.Record(n)
}

// answer wraps res's body to count the bytes the client reads. Closing it
// first reads what the caller left unread (a decoder stops at the end of
// the JSON value, before a trailing newline), up to drainLimit, so the
// count is the body's size.
func (c *sizeCount) answer(res *http.Response) {
	c.flavor = flavorIndex(res.ProtoMajor, res.ProtoMinor)
	c.read = &drainedBody{countedBody: countedBody{ReadCloser: res.Body}}
	res.Body = c.read
}

// drainLimit bounds what closing a counted answer reads of what its
// caller left.
const drainLimit = 64 << 10

// drainedBody is a counted answer body that is read to its end (within
// drainLimit) when closed.
type drainedBody struct {
	countedBody
}

func (b *drainedBody) Close() error {
	_, _ = io.Copy(io.Discard, io.LimitReader(&b.countedBody, drainLimit))
	return b.countedBody.Close()
}

// record records an attempt to tg that ended with status (0: no answer)
// and err: the answer's body bytes read when an answer came, and the
// request body bytes sent (see attempt and ended). It never fails the
// call.
func (s *clientSizes) record(tg *target, status int, c *sizeCount, err error) {
	defer func() { _ = recover() }() // telemetry never panics into a call
	k := clientSizeKey{host: tg.host, status: status, flavor: c.flavor}
	switch {
	case err != nil:
		k.errType = errorClass(err)
	case status >= 400:
		k.errType = strconv.Itoa(status)
	}
	sets := s.sets.Get(k, func(n int) (clientSizeSets, bool) {
		set := clientSizeSet(tg.static, k)
		return clientSizeSets{req: s.req.Bind(set), resp: s.resp.Bind(set)}, n < maxClientSizeSets
	})
	if c.read != nil {
		sets.resp.Record(c.read.n.Load())
	}
	switch {
	case c.length >= 0:
		c.sets = sets
		c.ended(err != nil)
	case c.sent != nil:
		sets.req.Record(c.sent.n.Load())
	default:
		sets.req.Record(0)
	}
}

// clientSizeSet is the attribute set of k on a target whose static
// attributes are static (method, server.address, server.port).
func clientSizeSet(static []attribute.KeyValue, k clientSizeKey) attribute.Set {
	attrs := make([]attribute.KeyValue, 0, len(static)+3)
	attrs = append(attrs, static...)
	if k.status != 0 {
		attrs = append(attrs, attribute.Int(contract.AttrHTTPResponseStatus, k.status))
	}
	if k.flavor >= 0 {
		attrs = append(attrs, attribute.String(contract.AttrNetworkProtocolVersion, flavors[k.flavor]))
	}
	if k.errType != "" {
		attrs = append(attrs, attribute.String(contract.AttrErrorType, k.errType))
	}
	return attribute.NewSet(attrs...)
}
