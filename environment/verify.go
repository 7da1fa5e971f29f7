package environment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// VerifyRequest is the body of POST /verify that a verify function gets:
// the dataset row (responses_create_params, the collector's indexes and
// every task field, in Fields) and the model's whole episode in
// Response; Response.OutputText() is the text of its answer. It is
// protocol.VerifyRequest, named here so that a verify function's
// signature needs no other package of this module.
type VerifyRequest = protocol.VerifyRequest

// Fields is a JSON object's members in their order, each kept as raw
// JSON: the members a Score adds to the verify response, and each verify
// response a ComputeMetrics hook reads (Get, Decode). It is
// protocol.Fields, named here so that an environment needs no other
// package of this module to name it.
type Fields = protocol.Fields

// Score is what a verify function concludes: the reward, and the members
// the verify response carries besides the echoed request and the reward
// (an extracted answer, a sub-score, ...), in order.
type Score struct {
	// Reward is the score of the episode. It must be a finite number.
	Reward float64
	// Fields are the response's own members. A member of the same name as
	// a task field replaces its echoed value; responses_create_params,
	// response and reward cannot be set this way.
	Fields Fields

	err error // from With: a value that did not encode
}

// With returns a copy of s with the member key set to value, encoded as
// JSON. A value that does not encode fails the verification.
func (s Score) With(key string, value any) Score {
	s.Fields = slices.Clone(s.Fields)
	if err := s.Fields.Set(key, value); err != nil && s.err == nil {
		s.err = err
	}
	return s
}

// WithFields returns a copy of s with every member of m set as With sets
// one, in key order.
func (s Score) WithFields(m map[string]any) Score {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s = s.With(k, m[k])
	}
	return s
}

// reservedMembers are the response members a Score cannot set.
var reservedMembers = map[string]bool{protocol.KeyParams: true, protocol.KeyResponse: true, protocol.KeyReward: true}

// check reports a score the response cannot carry.
func (s Score) check() error {
	if s.err != nil {
		return fmt.Errorf("environment: score member: %w", s.err)
	}
	if math.IsNaN(s.Reward) || math.IsInf(s.Reward, 0) {
		return errors.New("environment: the reward is not a finite number")
	}
	for _, f := range s.Fields {
		if reservedMembers[f.Key] {
			return fmt.Errorf("environment: a score cannot set the member %q", f.Key)
		}
	}
	return nil
}

// A Verifier scores an episode; Verify makes one.
type Verifier struct {
	// prepare decodes the task of req and returns the call that scores
	// it, or the 422 the task deserves.
	prepare func(req *VerifyRequest) (func(context.Context) (Score, error), error)
}

// Verify makes the Verifier of an environment from fn, which scores one
// episode: req is the verify request (the dataset row, with the model's
// episode in req.Response) and task is the row's task fields decoded into
// T.
//
// T is read the way upstream's pydantic models read a row, extra=ignore:
// each field of a struct T takes the member its json tag names, exactly
// (no case folding), and members T does not declare are ignored (they
// are echoed all the same). A field tagged `gym:"required"` must be
// present and, unless it is an interface, not null. A member of the
// wrong type, a missing required one, or an error from T's Validate
// method when *T has one, answers 422 with FastAPI's body, each problem
// located under "body" (a *protocol.ValidationError from Validate keeps
// its locations), and fn is not called. A T that is not a struct (a
// map, Fields) is decoded from the whole object.
//
// fn's Score makes the response: the request echoed, every member kept,
// plus reward and the score's members. An error from fn fails the
// verification: an *Error (see Errorf) answers its status with
// {"detail": msg}, any other error 500 with the message as a JSON
// string, as upstream answers an exception. fn runs inside the gym.verify
// span (ctx carries it), so its own calls nest under it. Verify panics
// when fn is nil.
func Verify[T any](fn func(ctx context.Context, req *VerifyRequest, task T) (Score, error)) Verifier {
	if fn == nil {
		panic("environment: Verify with a nil function")
	}
	decoderOf(reflect.TypeFor[T]()) // build the decoder now, not on the first request
	return Verifier{prepare: func(req *VerifyRequest) (func(context.Context) (Score, error), error) {
		task, err := decodeFields[T](req.Fields)
		if err != nil {
			return nil, protocol.DecodeError(err, "body")
		}
		return func(ctx context.Context) (Score, error) { return fn(ctx, req, task) }, nil
	}}
}

// errPanicked is what a panicking verification records on its span.
var errPanicked = errors.New("verifier panicked")

// verify answers POST /verify.
func (e *Environment) verify(ctx context.Context, req protocol.VerifyRequest) (protocol.VerifyResponse, error) {
	call, err := e.verifier.prepare(&req)
	if err != nil {
		return protocol.VerifyResponse{}, err
	}
	score, err := e.observe(ctx, call)
	if err != nil {
		return protocol.VerifyResponse{}, err
	}
	resp := protocol.NewVerifyResponse(req, score.Reward)
	for _, f := range score.Fields {
		resp.Fields.SetRaw(f.Key, f.Value)
	}
	return resp, nil
}

// observe runs one verification that got past validation inside its
// span, and records it exactly once: completed (whatever the reward) or
// failed (an error, an unusable score, a panic). A panic is recorded,
// then handed on to the runtime, which logs it and answers 500.
func (e *Environment) observe(ctx context.Context, call func(context.Context) (Score, error)) (score Score, err error) {
	start := time.Now()
	ctx, span := lens.StartRecording(ctx, telemetry.GroupVerify, contract.SpanVerify)
	var attrs *lens.Attrs // the span's, set in one call as it ends
	if span != nil {
		attrs = lens.NewAttrs()
		attrs.Add(attribute.String(contract.AttrServerName, e.serverName()))
		if id := server.RequestRolloutID(ctx); id != "" {
			attrs.Add(attribute.String(contract.AttrRolloutID, id))
		}
	}
	defer func() {
		r := recover()
		if r != nil {
			// The panic value stays off the span: it could quote task
			// data or the model's answer.
			err = errPanicked
		}
		metrics.RecordVerify(time.Since(start), err == nil)
		if span != nil {
			if err == nil {
				attrs.Add(attribute.Float64(contract.AttrVerifyReward, score.Reward))
			}
			attrs.SetOn(span)
			lens.End(span, err)
		}
		if r != nil {
			panic(r)
		}
	}()
	score, err = call(ctx)
	if err == nil {
		err = score.check()
	}
	return score, err
}

// serverName is the name gym.verify spans carry: the process's server
// name in the fleet, as telemetry was initialised with, else the
// environment's.
func (e *Environment) serverName() string {
	if v, ok := telemetry.Get().Resource().Set().Value(contract.AttrServerName); ok && v.AsString() != "" {
		return v.AsString()
	}
	return e.name
}
