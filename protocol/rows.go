package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"github.com/gymlens/gymlens/contract"
)

// Members a dataset row and its results carry besides the task fields.
const (
	KeyParams       = "responses_create_params"
	KeyResponse     = "response"
	KeyReward       = "reward"
	KeyTaskIndex    = "_ng_task_index"
	KeyRolloutIndex = "_ng_rollout_index"
	KeyAttemptIndex = "_ng_attempt_index"
	KeyRolloutID    = "_ng_rollout_id"
	KeyAgentRef     = "agent_ref"
	// KeyFailureClass marks a result that is a recorded failure rather
	// than a verification; the collector writes such lines to the
	// failures file.
	KeyFailureClass = "_ng_failure_class"
	// KeyNoPersist, when truthy, keeps a result out of every output file.
	KeyNoPersist = "_ng_no_persist"
	// KeyMaskSample, KeyFailureKind and KeyFailureReason are the members
	// upstream's BaseVerifyResponse always carries besides the reward:
	// whether the sample is left out of quality metrics (default false),
	// and the kind and text of an environment failure (default null).
	KeyMaskSample    = "mask_sample"
	KeyFailureKind   = "failure_kind"
	KeyFailureReason = "failure_reason"
)

// ServerRef names a server of the fleet: {"type": ..., "name": ...}.
type ServerRef struct {
	Type string `json:"type" yaml:"type"`
	Name string `json:"name" yaml:"name"`
}

// AgentRef returns the reference to an agent server instance.
func AgentRef(name string) *ServerRef { return &ServerRef{Type: contract.ServerTypeAgent, Name: name} }

// RunRequest is one dataset row, the body of an agent's POST /run:
// responses_create_params, the collector's bookkeeping members, and the
// task's own fields, which are passed on to /seed_session and /verify
// untouched (Fields).
type RunRequest struct {
	// ResponsesCreateParams is the prompt and sampling parameters
	// (required).
	ResponsesCreateParams ResponseCreateParams
	// TaskIndex, RolloutIndex and AttemptIndex are the collector's
	// numbering (_ng_task_index, _ng_rollout_index, _ng_attempt_index).
	TaskIndex, RolloutIndex, AttemptIndex *int
	// RolloutID is an explicit rollout id (_ng_rollout_id), "" if none.
	RolloutID string
	// AgentRef names the agent that runs the row.
	AgentRef *ServerRef
	// Upstream passes these bookkeeping members on untyped: one that does
	// not have the shape above (an index that is not an integer, an
	// agent_ref with other members, ...) is left nil and kept in Fields
	// as it came.
	// Fields holds the task fields and every other member.
	Fields Fields

	// present and nulls record the rowWire members a decoded value had,
	// and those that were null (present also holds decodedBit).
	present, nulls uint64
}

// VerifyRequest is the body of a resources server's POST /verify: the
// row, plus the model's whole episode as Response.
type VerifyRequest struct {
	RunRequest
	// Response is the episode to score (required).
	Response Response
}

// VerifyResponse is a verification's result: the request echoed, the
// reward, and the verifier's own members (in Fields, after the task's).
// It always encodes mask_sample, failure_kind and failure_reason, as
// upstream's BaseVerifyResponse dump does: a verifier that sets one puts
// it in Fields (KeyMaskSample, ...); the others go out as false and null.
type VerifyResponse struct {
	VerifyRequest
	// Reward is the score (required).
	Reward float64
}

// NewVerifyResponse echoes req with reward; add the verifier's members
// with resp.Fields.Set. A reward the request carried among its fields (a
// result sent to be verified again) is replaced.
func NewVerifyResponse(req VerifyRequest, reward float64) VerifyResponse {
	req.Fields = req.Fields.Clone()
	req.Fields.Delete(KeyReward)
	req.present |= rowReward
	req.nulls &^= rowReward
	// A request's own verification members (a result verified again) are
	// not the new verification's: upstream's request model drops them.
	for _, k := range verifyMembers {
		req.Fields.Delete(k.key)
	}
	req.nulls &^= rowMaskSample | rowFailureKind | rowFailureReason
	return VerifyResponse{VerifyRequest: req, Reward: reward}
}

// rowWire is a row as it is encoded.
type rowWire struct {
	Params        *ResponseCreateParams `json:"responses_create_params,omitempty"`
	Response      *Response             `json:"response,omitempty"`
	Reward        *float64              `json:"reward,omitempty"`
	TaskIndex     *int                  `json:"_ng_task_index,omitempty"`
	RolloutIndex  *int                  `json:"_ng_rollout_index,omitempty"`
	AttemptIndex  *int                  `json:"_ng_attempt_index,omitempty"`
	RolloutID     *string               `json:"_ng_rollout_id,omitempty"`
	AgentRef      *ServerRef            `json:"agent_ref,omitempty"`
	MaskSample    *bool                 `json:"mask_sample,omitempty"`
	FailureKind   *string               `json:"failure_kind,omitempty"`
	FailureReason *string               `json:"failure_reason,omitempty"`
}

// rowDecodeWire is a row as it is decoded: the same members (in the same
// order), with the response and reward left raw for the types that
// declare them, and the bookkeeping members raw for decodeRow to read
// leniently.
type rowDecodeWire struct {
	Params        *ResponseCreateParams `json:"responses_create_params,omitempty"`
	Response      json.RawMessage       `json:"response,omitempty"`
	Reward        json.RawMessage       `json:"reward,omitempty"`
	TaskIndex     json.RawMessage       `json:"_ng_task_index,omitempty"`
	RolloutIndex  json.RawMessage       `json:"_ng_rollout_index,omitempty"`
	AttemptIndex  json.RawMessage       `json:"_ng_attempt_index,omitempty"`
	RolloutID     json.RawMessage       `json:"_ng_rollout_id,omitempty"`
	AgentRef      json.RawMessage       `json:"agent_ref,omitempty"`
	MaskSample    json.RawMessage       `json:"mask_sample,omitempty"`
	FailureKind   json.RawMessage       `json:"failure_kind,omitempty"`
	FailureReason json.RawMessage       `json:"failure_reason,omitempty"`
}

// Bits of RunRequest.present, in rowWire's field order.
const (
	rowParams = 1 << iota
	rowResponse
	rowReward
	rowTaskIndex
	rowRolloutIndex
	rowAttemptIndex
	rowRolloutID
	rowAgentRef
	rowMaskSample
	rowFailureKind
	rowFailureReason
)

// verifyMembers are the members a verify response adds besides the
// reward: their row bits, and how upstream's model checks them.
var verifyMembers = []struct {
	bit uint64
	key string
	s   *shape
}{{rowMaskSample, KeyMaskSample, boolShape}, {rowFailureKind, KeyFailureKind, optStr}, {rowFailureReason, KeyFailureReason, optStr}}

func encodeRow(r *RunRequest, resp *Response, reward *float64) ([]byte, error) {
	p := r.ResponsesCreateParams
	w := rowWire{Params: &p, Response: resp, Reward: reward, TaskIndex: r.TaskIndex,
		RolloutIndex: r.RolloutIndex, AttemptIndex: r.AttemptIndex, AgentRef: r.AgentRef}
	if r.RolloutID != "" || r.present&^r.nulls&rowRolloutID != 0 {
		w.RolloutID = &r.RolloutID
	}
	nulls := r.nulls
	if reward != nil {
		// A verify response: the verification members upstream always
		// dumps, with their defaults unless the verifier set them.
		masked := false
		if !r.Fields.Has(KeyMaskSample) {
			w.MaskSample = &masked
		}
		for _, k := range verifyMembers[1:] {
			if !r.Fields.Has(k.key) {
				nulls |= k.bit
			}
		}
	}
	return encodeObject(nil, &w, r.Fields, nulls)
}

// decodeRow decodes a row; the response and reward, when the target type
// (declares) does not declare them, go into Fields as they came.
func decodeRow(b []byte, r *RunRequest, declares uint64) (w rowDecodeWire, err error) {
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return w, err
	}
	*r = RunRequest{Fields: extra, present: present | decodedBit, nulls: nulls}
	if w.Params != nil {
		r.ResponsesCreateParams = *w.Params
	}
	var rolloutID *string
	for _, m := range []struct {
		bit  uint64
		key  string
		raw  json.RawMessage
		read func() bool // decodes raw into r, reporting success
	}{
		{rowResponse, KeyResponse, w.Response, func() bool { return declares&rowResponse != 0 }},
		{rowReward, KeyReward, w.Reward, func() bool { return declares&rowReward != 0 }},
		{rowTaskIndex, KeyTaskIndex, w.TaskIndex, func() bool { return readInt(w.TaskIndex, &r.TaskIndex) }},
		{rowRolloutIndex, KeyRolloutIndex, w.RolloutIndex, func() bool { return readInt(w.RolloutIndex, &r.RolloutIndex) }},
		{rowAttemptIndex, KeyAttemptIndex, w.AttemptIndex, func() bool { return readInt(w.AttemptIndex, &r.AttemptIndex) }},
		{rowRolloutID, KeyRolloutID, w.RolloutID, func() bool {
			return decodeValue(w.RolloutID, reflect.ValueOf(&rolloutID).Elem()) == nil
		}},
		{rowAgentRef, KeyAgentRef, w.AgentRef, func() bool { return readServerRef(w.AgentRef, &r.AgentRef) }},
		{rowMaskSample, KeyMaskSample, w.MaskSample, func() bool { return false }},
		{rowFailureKind, KeyFailureKind, w.FailureKind, func() bool { return false }},
		{rowFailureReason, KeyFailureReason, w.FailureReason, func() bool { return false }},
	} {
		if present&^nulls&m.bit == 0 || m.read() {
			continue
		}
		// Not declared by the target type, or not of the declared shape.
		r.Fields = append(r.Fields, Field{Key: m.key, Value: oneLine(bytes.Clone(m.raw))})
		r.present &^= m.bit
	}
	r.RolloutID = deref(rolloutID)
	return w, nil
}

// readInt decodes raw into *dst when it is an integer.
func readInt(raw json.RawMessage, dst **int) bool {
	return decodeValue(raw, reflect.ValueOf(dst).Elem()) == nil
}

// readServerRef decodes raw into *dst when it is exactly a {type, name}
// object of strings, which encodes back as it came.
func readServerRef(raw json.RawMessage, dst **ServerRef) bool {
	var w struct {
		Type *string `json:"type"`
		Name *string `json:"name"`
	}
	extra, present, nulls, err := decodeObject(raw, &w)
	if err != nil || len(extra) > 0 || present != 3 || nulls != 0 {
		return false
	}
	*dst = &ServerRef{Type: *w.Type, Name: *w.Name}
	return true
}

// decodeMember decodes the raw value of row member key into dst; a type
// error names its location under key, as if dst had been decoded with
// the row.
func decodeMember(raw json.RawMessage, key string, dst any) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	return withField(decodeValue(raw, reflect.ValueOf(dst).Elem()), key)
}

// required checks a required row member that arrived (bit).
func (r *RunRequest) required(v *validator, bit uint64, key, kind, msg string) {
	switch {
	case r.present&bit == 0:
		v.missing(nil, key)
	case r.nulls&bit != 0:
		v.add(kind, msg, json.RawMessage("null"), key)
	}
}

// MarshalJSON encodes the row.
func (r RunRequest) MarshalJSON() ([]byte, error) { return encodeRow(&r, nil, nil) }

// UnmarshalJSON decodes a row; Validate checks it. A response or reward
// the row carries is kept in Fields as it came.
func (r *RunRequest) UnmarshalJSON(b []byte) error {
	if err := checkValid(b); err != nil {
		return err
	}
	_, err := decodeRow(b, r, 0)
	return err
}

// Validate checks the row against upstream's schema: the parameters are
// required and must satisfy ResponseCreateParams' rules. A row built in
// Go is checked as it would encode.
func (r *RunRequest) Validate() error {
	var v validator
	r.validate(&v)
	return v.err()
}

func (r *RunRequest) validate(v *validator) {
	if raw, ok := r.Fields.Get(KeyRolloutID); ok && r.present&rowRolloutID == 0 {
		// upstream reads _ng_rollout_id as an optional string.
		optStr.check(v, raw, []any{KeyRolloutID})
	}
	if r.present&decodedBit != 0 && r.present&^r.nulls&rowParams == 0 {
		r.required(v, rowParams, KeyParams, ErrModelType, "Input should be a valid dictionary or object to extract fields from")
		return
	}
	r.ResponsesCreateParams.validate(v, nil, []any{KeyParams})
}

// MarshalJSON encodes the row and its response.
func (r VerifyRequest) MarshalJSON() ([]byte, error) {
	resp := r.Response
	return encodeRow(&r.RunRequest, &resp, nil)
}

// UnmarshalJSON decodes a verify request; Validate checks it. A reward
// the request carries is kept in Fields as it came.
func (r *VerifyRequest) UnmarshalJSON(b []byte) error {
	if err := checkValid(b); err != nil {
		return err
	}
	w, err := decodeRow(b, &r.RunRequest, rowResponse)
	r.Response = Response{}
	if err != nil {
		return err
	}
	return decodeMember(w.Response, KeyResponse, &r.Response)
}

// Validate checks the row and the response.
func (r *VerifyRequest) Validate() error {
	var v validator
	r.validate(&v)
	return v.err()
}

func (r *VerifyRequest) validate(v *validator) {
	r.RunRequest.validate(v)
	if r.present&decodedBit != 0 && r.present&^r.nulls&rowResponse == 0 {
		r.required(v, rowResponse, KeyResponse, ErrModelType, "Input should be a valid dictionary or object to extract fields from")
		return
	}
	r.Response.validate(v, nil, []any{KeyResponse})
}

// MarshalJSON encodes the echoed request, the reward and the verifier's
// members.
func (r VerifyResponse) MarshalJSON() ([]byte, error) {
	resp, reward := r.Response, r.Reward
	return encodeRow(&r.RunRequest, &resp, &reward)
}

// UnmarshalJSON decodes a verify response.
func (r *VerifyResponse) UnmarshalJSON(b []byte) error {
	if err := checkValid(b); err != nil {
		return err
	}
	w, err := decodeRow(b, &r.RunRequest, rowResponse|rowReward)
	r.Response, r.Reward = Response{}, 0
	if err != nil {
		return err
	}
	if err := decodeMember(w.Response, KeyResponse, &r.Response); err != nil {
		return err
	}
	var reward laxFloat64 // upstream reads the reward as pydantic's float
	err = decodeMember(w.Reward, KeyReward, &reward)
	r.Reward = float64(reward)
	return err
}

// Validate checks the echoed request and, for a decoded value, that a
// reward is present.
func (r *VerifyResponse) Validate() error {
	var v validator
	r.VerifyRequest.validate(&v)
	if r.present&decodedBit != 0 {
		r.required(&v, rowReward, KeyReward, ErrFloat, "Input should be a valid number")
	}
	for _, k := range verifyMembers {
		if r.nulls&k.bit != 0 {
			k.s.check(&v, json.RawMessage("null"), []any{k.key})
		} else if raw, ok := r.Fields.Get(k.key); ok {
			k.s.check(&v, raw, []any{k.key})
		}
	}
	return v.err()
}

// SeedSessionRequest is the body of POST /seed_session: any JSON object
// (upstream's agent sends the whole row); an environment reads the
// members it needs from Fields.
type SeedSessionRequest struct {
	Fields Fields
}

// MarshalJSON encodes the members.
func (r SeedSessionRequest) MarshalJSON() ([]byte, error) { return r.Fields.MarshalJSON() }

// UnmarshalJSON accepts any JSON object.
func (r *SeedSessionRequest) UnmarshalJSON(b []byte) error { return r.Fields.UnmarshalJSON(b) }

// SeedSessionResponse is the answer of /seed_session, {} unless an
// environment adds members.
type SeedSessionResponse struct {
	Fields Fields
}

// MarshalJSON encodes the members ({} when there are none).
func (r SeedSessionResponse) MarshalJSON() ([]byte, error) { return r.Fields.MarshalJSON() }

// UnmarshalJSON accepts any JSON object.
func (r *SeedSessionResponse) UnmarshalJSON(b []byte) error { return r.Fields.UnmarshalJSON(b) }

// AggregateMetricsRequest is the body of POST /aggregate_metrics.
type AggregateMetricsRequest struct {
	// VerifyResponses are the results to aggregate, as JSON objects
	// (required).
	VerifyResponses []Fields `json:"verify_responses"`

	// present and nulls record whether verify_responses arrived, and as
	// null, in a decoded request (present also holds decodedBit);
	// notObjects lists the entries that were not objects.
	present, nulls uint64
	notObjects     []int
}

// UnmarshalJSON decodes the request; Validate checks it. Members other
// than verify_responses are ignored, as upstream ignores them.
func (r *AggregateMetricsRequest) UnmarshalJSON(b []byte) error {
	if err := checkValid(b); err != nil {
		return err
	}
	*r = AggregateMetricsRequest{present: decodedBit}
	var list []byte // the last verify_responses, as Python's json module keeps it
	err := scanObject(b, typeObject, func(key string, raw []byte) error {
		if key == "verify_responses" {
			list = raw
		}
		return nil
	})
	if err != nil || list == nil {
		return err
	}
	r.present |= 1
	switch rawKind(list) {
	case "null":
		r.nulls |= 1
		return nil
	case "array":
	default:
		return withField(&json.UnmarshalTypeError{Value: rawKind(list), Type: typeList}, "verify_responses")
	}
	r.VerifyResponses = []Fields{}
	return scanArray(list, func(i int, raw []byte) error {
		var f Fields
		if rawKind(raw) != "object" {
			// Not a dictionary: Validate reports it where upstream does.
			r.notObjects = append(r.notObjects, i)
		} else {
			members, _, _, err := splitMembers(raw, nil)
			if err != nil {
				return withField(err, "verify_responses."+strconv.Itoa(i))
			}
			f = members
			if f == nil {
				f = Fields{}
			}
		}
		r.VerifyResponses = append(r.VerifyResponses, f)
		return nil
	})
}

// Validate checks, for a decoded request, that verify_responses is there
// and is a list of objects, as upstream's AggregateMetricsRequest
// requires.
func (r *AggregateMetricsRequest) Validate() error {
	var v validator
	switch {
	case r.present&decodedBit == 0:
	case r.present&1 == 0:
		v.missing(nil, "verify_responses")
	case r.nulls&1 != 0:
		v.add(ErrList, "Input should be a valid list", json.RawMessage("null"), "verify_responses")
	}
	for _, i := range r.notObjects {
		v.add(ErrDict, "Input should be a valid dictionary", nil, "verify_responses", i)
	}
	return v.err()
}

// AggregateMetricsResponse is the answer of /aggregate_metrics
// (upstream's AggregateMetrics).
type AggregateMetricsResponse struct {
	GroupLevelMetrics []json.RawMessage `json:"group_level_metrics"`
	AgentMetrics      map[string]any    `json:"agent_metrics"`
	KeyMetrics        map[string]any    `json:"key_metrics"`
	// PerfSummary holds the cross-rollout efficiency statistics; null
	// when no rollout carried any.
	PerfSummary map[string]any `json:"perf_summary"`
	// RepeatLevelMetrics holds one object per repeat; it encodes as []
	// when nil.
	RepeatLevelMetrics []json.RawMessage `json:"repeat_level_metrics"`
}

// MarshalJSON encodes the metrics with every member upstream's model
// dumps: empty lists as [], maps as {}, perf_summary as null when unset.
func (m AggregateMetricsResponse) MarshalJSON() ([]byte, error) {
	type plain AggregateMetricsResponse
	if m.GroupLevelMetrics == nil {
		m.GroupLevelMetrics = []json.RawMessage{}
	}
	if m.AgentMetrics == nil {
		m.AgentMetrics = map[string]any{}
	}
	if m.KeyMetrics == nil {
		m.KeyMetrics = map[string]any{}
	}
	if m.RepeatLevelMetrics == nil {
		m.RepeatLevelMetrics = []json.RawMessage{}
	}
	b, err := json.Marshal(plain(m))
	if err != nil {
		return nil, fmt.Errorf("aggregate metrics: %w", err)
	}
	return b, nil
}
