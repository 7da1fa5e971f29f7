package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"

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
	return VerifyResponse{VerifyRequest: req, Reward: reward}
}

// rowWire is a row as it is encoded.
type rowWire struct {
	Params       *ResponseCreateParams `json:"responses_create_params,omitempty"`
	Response     *Response             `json:"response,omitempty"`
	Reward       *float64              `json:"reward,omitempty"`
	TaskIndex    *int                  `json:"_ng_task_index,omitempty"`
	RolloutIndex *int                  `json:"_ng_rollout_index,omitempty"`
	AttemptIndex *int                  `json:"_ng_attempt_index,omitempty"`
	RolloutID    *string               `json:"_ng_rollout_id,omitempty"`
	AgentRef     *ServerRef            `json:"agent_ref,omitempty"`
}

// rowDecodeWire is a row as it is decoded: the same members (in the same
// order), with the response and reward left raw for the types that
// declare them, and the bookkeeping members raw for decodeRow to read
// leniently.
type rowDecodeWire struct {
	Params       *ResponseCreateParams `json:"responses_create_params,omitempty"`
	Response     json.RawMessage       `json:"response,omitempty"`
	Reward       json.RawMessage       `json:"reward,omitempty"`
	TaskIndex    json.RawMessage       `json:"_ng_task_index,omitempty"`
	RolloutIndex json.RawMessage       `json:"_ng_rollout_index,omitempty"`
	AttemptIndex json.RawMessage       `json:"_ng_attempt_index,omitempty"`
	RolloutID    json.RawMessage       `json:"_ng_rollout_id,omitempty"`
	AgentRef     json.RawMessage       `json:"agent_ref,omitempty"`
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
)

func encodeRow(r *RunRequest, resp *Response, reward *float64) ([]byte, error) {
	p := r.ResponsesCreateParams
	w := rowWire{Params: &p, Response: resp, Reward: reward, TaskIndex: r.TaskIndex,
		RolloutIndex: r.RolloutIndex, AttemptIndex: r.AttemptIndex, AgentRef: r.AgentRef}
	if r.RolloutID != "" || r.present&^r.nulls&rowRolloutID != 0 {
		w.RolloutID = &r.RolloutID
	}
	return encodeObject(nil, &w, r.Fields, r.nulls)
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
	return decodeMember(w.Reward, KeyReward, &r.Reward)
}

// Validate checks the echoed request and, for a decoded value, that a
// reward is present.
func (r *VerifyResponse) Validate() error {
	var v validator
	r.VerifyRequest.validate(&v)
	if r.present&decodedBit != 0 {
		r.required(&v, rowReward, KeyReward, ErrFloat, "Input should be a valid number")
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
	// VerifyResponses are the results to aggregate, as JSON objects.
	VerifyResponses []Fields `json:"verify_responses"`
}

// AggregateMetricsResponse is the answer of /aggregate_metrics.
type AggregateMetricsResponse struct {
	GroupLevelMetrics []json.RawMessage `json:"group_level_metrics"`
	AgentMetrics      map[string]any    `json:"agent_metrics"`
	KeyMetrics        map[string]any    `json:"key_metrics"`
}
