package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/telemetry"
)

// ErrNotStreamed is what the stream function of a HandleStream route
// returns for a body it does not read as it arrives: the route then reads
// the whole body and answers it as Handle would.
var ErrNotStreamed = errors.New("server: body not of the streamed shape")

// HandleStream registers a JSON endpoint whose body is read as it
// arrives, for a request a caller keeps open while it produces the body
// (the collector streams /aggregate_metrics over a whole collection).
// stream reads the body; the read timeout does not apply to it (the
// caller's pace is the body's), the body limit and decoded-size budget
// do, as Handle's. When stream returns ErrNotStreamed (it saw a shape it
// does not take), what it read and the rest of the body are decoded into
// Req and answered by fn, exactly as Handle answers them, 422 details
// included; stream should return it too for a body it could not read to
// its end, which Handle then answers (413, 408, 422). Otherwise stream's
// result or error is the answer, as fn's would be (a body read error
// among them gives Handle's 413 or 408).
func HandleStream[Req, Resp any](s *Server, pattern string, stream func(context.Context, io.Reader) (Resp, error),
	fn func(context.Context, Req) (Resp, error), opts ...RouteOption) {
	l := routeLimits{body: s.opts.MaxBodyBytes, decoded: s.opts.MaxDecodedBytes}
	for _, o := range opts {
		o(&l)
	}
	limit, budget := l.body, l.decoded
	s.register(pattern, func(w http.ResponseWriter, r *http.Request) {
		// The body comes as fast as its caller produces it: no deadline
		// (the connection's end, or the caller's, ends the read).
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		var body io.Reader = http.MaxBytesReader(w, r.Body, limit)
		if budget > 0 {
			body = &decodeBudget{r: body, limit: budget}
		}
		seen := &recorded{r: body}
		ctx := context.WithValue(r.Context(), exchangeKey{}, &exchange{header: w.Header(), req: r})
		resp, err := stream(ctx, seen)
		if errors.Is(err, ErrNotStreamed) {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(seen.buf.Bytes()), r.Body))
			req, ok := decodeRequest[Req](s, w, r, limit, budget)
			if !ok {
				return
			}
			resp, err = fn(ctx, req)
		} else if bodyErr(err) {
			err = decodeError(err)
		}
		s.setWriteDeadline(w)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

// bodyErr reports an error of reading a request body: over a limit, or
// timed out.
func bodyErr(err error) bool {
	var maxErr *http.MaxBytesError
	var sizeErr *DecodedSizeError
	var netErr net.Error
	return errors.As(err, &maxErr) || errors.As(err, &sizeErr) || (errors.As(err, &netErr) && netErr.Timeout())
}

// recorded reads r and keeps what it read, so a body read in part can be
// read again whole.
type recorded struct {
	r   io.Reader
	buf bytes.Buffer
}

func (t *recorded) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.buf.Write(p[:n])
	return n, err
}

// Timeout is the time limit of one call of the client (ClientOptions.Timeout).
func (c *Client) Timeout() time.Duration { return c.timeout }

// PostStream sends body to rawURL as it is read (chunked), for a request
// whose body is produced while it is being sent, and decodes a 2xx answer
// into resp (a *RawJSON takes the answer as it came, unchecked; an
// AnswerReader reads it as it arrives); a
// non-2xx answer is a *StatusError. Unlike Post it sets no time limit
// (ctx's bounds the call) and never sends the request again: a body read
// once cannot be resent. A read error of body ends the call with it.
func (c *Client) PostStream(ctx context.Context, rawURL string, body io.Reader, resp any) (err error) {
	tg, err := c.target(rawURL)
	if err != nil {
		return fmt.Errorf("client: bad URL: %w", err)
	}
	var reply Reply
	if lens.Enabled(telemetry.GroupHTTPClient) {
		var span trace.Span
		ctx, span = lens.Start(ctx, telemetry.GroupHTTPClient, clientSpanName, startOptions(ctx)...)
		if span.IsRecording() {
			attrs := lens.NewAttrs()
			c.callAttributes(ctx, attrs, &tg)
			defer func() {
				if status := StatusOf(err); status != 0 {
					attrs.Add(attribute.Int(contract.AttrHTTPResponseStatus, status))
				} else if reply.Status != 0 {
					attrs.Add(attribute.Int(contract.AttrHTTPResponseStatus, reply.Status))
				}
				if err != nil {
					attrs.Add(attribute.String(contract.AttrErrorType, errorClass(err)))
					span.SetStatus(codes.Error, err.Error())
				}
				attrs.SetOn(span)
				span.End()
			}()
		} else {
			defer span.End()
		}
	}
	if reply, err = c.once(ctx, &tg, body, resp, Call{}, c.bodySizes()); err != nil {
		recordTimeout(err)
		return fmt.Errorf("client: POST %s: %w", tg.safe, err)
	}
	return nil
}

// HandleStreamFunc registers a plain handler, as HandleFunc does, for a
// route whose request body is read as it arrives (see HandleStream): the
// read timeout does not apply to it.
func (s *Server) HandleStreamFunc(pattern string, h http.HandlerFunc) {
	s.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		h(w, r)
	})
}

// answerDeadline starts the server's write timeout with the answer.
type answerDeadline struct {
	http.ResponseWriter
	s       *Server
	started bool
}

func (a *answerDeadline) start() {
	if !a.started {
		a.started = true
		a.s.setWriteDeadline(a.ResponseWriter)
	}
}

func (a *answerDeadline) WriteHeader(status int) {
	a.start()
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerDeadline) Write(b []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (a *answerDeadline) Unwrap() http.ResponseWriter { return a.ResponseWriter }
