package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Response statuses.
const (
	ResponseCompleted  = "completed"
	ResponseIncomplete = "incomplete"
	ResponseFailed     = "failed"
)

// ObjectResponse is the value of Response.Object.
const ObjectResponse = "response"

// Response is a Responses API response as NeMo Gym validates it
// (NeMoGymResponse): the required members always encode, output items
// must carry a type, and members it does not declare are kept in Extra
// (upstream allows them).
type Response struct {
	// ID is the response id.
	ID string
	// Object is always "response".
	Object string
	// CreatedAt is a Unix time in seconds.
	CreatedAt float64
	// Model is the model that answered.
	Model string
	// Output holds the output items; never nil on the wire.
	Output []Item
	// ParallelToolCalls, ToolChoice and Tools echo the request's (with
	// upstream's defaults).
	ParallelToolCalls bool
	ToolChoice        ToolChoice
	Tools             []Tool
	// Status is completed, incomplete, failed, in_progress, cancelled or
	// queued; "" leaves it out.
	Status string
	// IncompleteDetails says why a response is incomplete; upstream's
	// simple agent stops its loop when it is set.
	IncompleteDetails *IncompleteDetails
	// Usage counts tokens; nil leaves it out.
	Usage *Usage
	// Error is the error object of a failed response.
	Error json.RawMessage
	// Instructions, Temperature, TopP, MaxOutputTokens and Metadata echo
	// the request's, when set.
	Instructions    *string
	Temperature     *float64
	TopP            *float64
	MaxOutputTokens *int
	Metadata        map[string]string
	// Extra holds every member not declared above (and instructions in
	// the list form).
	Extra Fields

	present, nulls uint64 // responseWire members that arrived, and were null
}

type responseWire struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         laxFloat64         `json:"created_at"`
	Model             string             `json:"model"`
	Output            []Item             `json:"output"`
	ParallelToolCalls *laxBool           `json:"parallel_tool_calls"`
	ToolChoice        *ToolChoice        `json:"tool_choice"`
	Tools             []Tool             `json:"tools"`
	Status            *string            `json:"status,omitempty"`
	IncompleteDetails *IncompleteDetails `json:"incomplete_details,omitempty"`
	Usage             *Usage             `json:"usage,omitempty"`
	Error             json.RawMessage    `json:"error,omitempty"`
	Instructions      json.RawMessage    `json:"instructions,omitempty"`
	Temperature       *laxFloat64        `json:"temperature,omitempty"`
	TopP              *laxFloat64        `json:"top_p,omitempty"`
	MaxOutputTokens   *laxInt            `json:"max_output_tokens,omitempty"`
	Metadata          *stringMap         `json:"metadata,omitempty"`
}

// Bits of Response.present, in responseWire's field order.
const (
	respID = 1 << iota
	respObject
	respCreatedAt
	respModel
	respOutput
	respParallelToolCalls
	respToolChoice
	respTools
	respStatus
	_ // incomplete_details
	_ // usage
	_ // error
	respInstructions
)

// responseStatuses are the values of a response's status.
var responseStatuses = []string{ResponseCompleted, ResponseFailed, StatusInProgress, "cancelled", "queued", ResponseIncomplete}

// MarshalJSON encodes the response with every required member present.
// A member that arrived as null goes back out as null.
func (r Response) MarshalJSON() ([]byte, error) { return r.appendJSON(nil) }

func (r *Response) appendJSON(buf []byte) ([]byte, error) {
	tc := r.ToolChoice
	if tc.Mode == "" && len(tc.Object) == 0 {
		tc.Mode = ToolChoiceAuto
	}
	ptc := laxBool(r.ParallelToolCalls)
	w := responseWire{ID: r.ID, Object: r.Object, CreatedAt: laxFloat64(r.CreatedAt), Model: r.Model, Output: r.Output,
		ParallelToolCalls: &ptc, ToolChoice: &tc, Tools: r.Tools,
		IncompleteDetails: r.IncompleteDetails, Usage: r.Usage, Error: nullToNil(r.Error),
		Temperature: (*laxFloat64)(r.Temperature), TopP: (*laxFloat64)(r.TopP), MaxOutputTokens: (*laxInt)(r.MaxOutputTokens)}
	if r.Status != "" || r.present&^r.nulls&respStatus != 0 {
		w.Status = &r.Status
	}
	if r.Instructions != nil {
		w.Instructions = mustRaw(*r.Instructions)
	}
	if r.Metadata != nil {
		m := stringMap(r.Metadata)
		w.Metadata = &m
	}
	if w.Object == "" {
		w.Object = ObjectResponse
	}
	if w.Output == nil {
		w.Output = []Item{}
	}
	if w.Tools == nil {
		w.Tools = []Tool{}
	}
	return encodeObject(buf, &w, r.Extra, r.nulls)
}

// UnmarshalJSON decodes a response; Validate checks it against
// upstream's schema.
func (r *Response) UnmarshalJSON(b []byte) error { return decodeChecked(b, r) }

func (r *Response) decodeRaw(b []byte) error {
	var w responseWire
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*r = Response{ID: w.ID, Object: w.Object, CreatedAt: float64(w.CreatedAt), Model: w.Model, Output: w.Output,
		Tools: w.Tools, Status: deref(w.Status), IncompleteDetails: w.IncompleteDetails, Usage: w.Usage,
		Error: nullToNil(w.Error), Temperature: (*float64)(w.Temperature), TopP: (*float64)(w.TopP),
		MaxOutputTokens: (*int)(w.MaxOutputTokens), Extra: extra, present: present | decodedBit, nulls: nulls}
	if w.ParallelToolCalls != nil {
		r.ParallelToolCalls = bool(*w.ParallelToolCalls)
	}
	if w.ToolChoice != nil {
		r.ToolChoice = *w.ToolChoice
	}
	if w.Metadata != nil {
		r.Metadata = *w.Metadata
	}
	if present&^nulls&respInstructions != 0 {
		if raw := bytes.TrimSpace(w.Instructions); raw[0] == '"' {
			s, err := decodeString(raw)
			if err != nil {
				return withField(err, "instructions")
			}
			r.Instructions = &s
		} else {
			// The list form (input items) is kept as it came.
			r.present &^= respInstructions
			r.Extra = append(r.Extra, Field{Key: "instructions", Value: oneLine(raw)})
		}
	}
	return nil
}

// Validate checks a decoded response against NeMoGymResponse: the
// required members, output items with a known type and their required
// members, and a complete usage object. A response built in Go is
// checked as it would encode.
func (r *Response) Validate() error {
	var v validator
	r.validate(&v, nil, nil)
	return v.err()
}

// requiredResponse lists the members a response requires, with the
// error a null value gives.
var requiredResponse = []struct {
	key, kind, msg string
}{
	{"id", ErrString, "Input should be a valid string"},
	{"object", ErrLiteral, "Input should be 'response'"},
	{"created_at", ErrFloat, "Input should be a valid number"},
	{"model", ErrString, "Input should be a valid string"},
	{"output", ErrList, "Input should be a valid list"},
	{"parallel_tool_calls", ErrBool, "Input should be a valid boolean"},
	{"tool_choice", ErrLiteral, "Input should be 'none', 'auto' or 'required'"},
	{"tools", ErrList, "Input should be a valid list"},
}

func (r *Response) validate(v *validator, raw json.RawMessage, loc []any) {
	if r.present&decodedBit == 0 {
		var d Response
		if b, err := json.Marshal(r); err == nil && json.Unmarshal(b, &d) == nil {
			r = &d
		}
	}
	for i, m := range requiredResponse {
		switch {
		case r.present&(1<<i) == 0:
			v.missing(raw, at(loc, m.key)...)
		case r.nulls&(1<<i) != 0:
			v.add(m.kind, m.msg, json.RawMessage("null"), at(loc, m.key)...)
		}
	}
	if r.present&^r.nulls&respObject != 0 && r.Object != ObjectResponse {
		v.add(ErrLiteral, "Input should be 'response'", mustRaw(r.Object), at(loc, "object")...)
	}
	for i, it := range r.Output {
		it.validateOutput(v, at(loc, "output", i))
	}
	for i := range r.Tools {
		r.Tools[i].validate(v, at(loc, "tools", i), false)
	}
	if r.present&^r.nulls&respToolChoice != 0 {
		r.ToolChoice.validate(v, at(loc, "tool_choice"), false)
	}
	if r.present&^r.nulls&respStatus != 0 && !slices.Contains(responseStatuses, r.Status) {
		v.add(ErrLiteral, "Input should be 'completed', 'failed', 'in_progress', 'cancelled', 'queued' or 'incomplete'",
			mustRaw(r.Status), at(loc, "status")...)
	}
	if r.Usage != nil {
		r.Usage.validate(v, at(loc, "usage"))
	}
	for _, f := range responseOptional.fields {
		if raw, ok := r.Extra.Get(f.key); ok {
			f.s.check(v, raw, at(loc, f.key))
		}
	}
}

// moderationResult is one side of a response's moderation
// (openai/types/responses/response.py's ModerationInput and
// ModerationOutput, which declare the same members).
var moderationResult = union(
	object(false, "categories!", &shape{kind: shapeDict, elem: boolShape},
		"category_applied_input_types!", &shape{kind: shapeDict, elem: listOf(lit("text", "image"))},
		"category_scores!", &shape{kind: shapeDict, elem: floatShape}, "flagged!", boolShape, "model!", strShape,
		"type!", lit("moderation_result")),
	object(false, "code!", strShape, "message!", strShape, "type!", lit("error")))

// responseOptional are optional members of upstream's response model
// that Response keeps in Extra, with their shapes, nested models
// included.
var responseOptional = object(false, "background", optBool, "completed_at", optFloat,
	"conversation", nullable(object(false, "id!", strShape)), "max_tool_calls", optInt,
	"moderation", nullable(object(false, "input!", moderationResult, "output!", moderationResult)), "previous_response_id", optStr,
	"prompt", nullable(object(false, "id!", strShape,
		"variables", nullable(&shape{kind: shapeDict, elem: union(strShape, inputTextPart, inputImagePart, inputFileModel)}),
		"version", optStr)),
	"prompt_cache_key", optStr, "prompt_cache_retention", optLit("in_memory", "24h"),
	"reasoning", nullable(object(false, "context", optLit("auto", "current_turn", "all_turns"),
		"effort", optLit("none", "minimal", "low", "medium", "high", "xhigh"),
		"generate_summary", optLit("auto", "concise", "detailed"), "summary", optLit("auto", "concise", "detailed"))),
	"safety_identifier", optStr, "service_tier", optLit("auto", "default", "flex", "scale", "priority"),
	"text", nullable(object(false, "format", nullable(union(object(false, "type!", lit("text")),
		object(false, "name!", strShape, "schema!", objAny, "type!", lit("json_schema"), "description", optStr, "strict", optBool),
		object(false, "type!", lit("json_object")))), "verbosity", optLit("low", "medium", "high"))),
	"top_logprobs", optInt, "truncation", optLit("auto", "disabled"), "user", optStr)

// OutputText joins the text of every output_text part of every message
// item, with nothing between them, as openai-python's
// Response.output_text does.
func (r Response) OutputText() string {
	var b []byte
	for _, it := range r.Output {
		if it.Type != TypeMessage || it.Content == nil {
			continue
		}
		for _, p := range it.Content.Parts {
			if p.Type == PartOutputText {
				b = append(b, p.Text...)
			}
		}
	}
	return string(b)
}

// FunctionCalls returns the function_call items of the output.
func (r Response) FunctionCalls() []Item {
	var out []Item
	for _, it := range r.Output {
		if it.Type == TypeFunctionCall {
			out = append(out, it)
		}
	}
	return out
}

// HasAssistantMessage reports whether the output holds a message whose
// role is assistant.
func (r Response) HasAssistantMessage() bool {
	for _, it := range r.Output {
		if it.Type == TypeMessage && (it.Role == RoleAssistant || it.Role == "") {
			return true
		}
	}
	return false
}

// IncompleteDetails says why a response stopped early.
type IncompleteDetails struct {
	// Reason is max_output_tokens or content_filter.
	Reason string `json:"reason,omitempty"`
}

// Usage counts a response's tokens. Both detail objects always encode
// with their keys, as upstream requires; a nil count encodes as null.
type Usage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`

	// absent and null record, for validation, the usage* members that
	// were absent or null (or, for a detail object, not an object) when
	// decoded.
	absent, null uint8
}

// Members of a decoded usage object that upstream requires.
const (
	usageInputTokens = 1 << iota
	usageOutputTokens
	usageTotalTokens
	usageInputDetails
	usageCachedTokens
	usageOutputDetails
	usageReasoningTokens
)

// InputTokensDetails breaks input tokens down.
type InputTokensDetails struct {
	CachedTokens *int `json:"cached_tokens"`
}

// OutputTokensDetails breaks output tokens down.
type OutputTokensDetails struct {
	ReasoningTokens *int `json:"reasoning_tokens"`
}

// NewUsage returns a usage with both detail counts at zero.
func NewUsage(input, output int) *Usage {
	zero1, zero2 := 0, 0
	return &Usage{InputTokens: input, OutputTokens: output, TotalTokens: input + output,
		InputTokensDetails: InputTokensDetails{CachedTokens: &zero1}, OutputTokensDetails: OutputTokensDetails{ReasoningTokens: &zero2}}
}

// Add returns the sum of u and o as upstream's agent adds a rollout's
// usage up: counts add, and a detail count unknown on either side stays
// unknown. A nil side leaves (a copy of) the other. The result shares
// nothing with u or o.
func (u *Usage) Add(o *Usage) *Usage {
	if o == nil {
		return u.clone()
	}
	if u == nil {
		return o.clone()
	}
	sum := &Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens,
		TotalTokens: u.TotalTokens + o.TotalTokens}
	sum.InputTokensDetails.CachedTokens = addCounts(u.InputTokensDetails.CachedTokens, o.InputTokensDetails.CachedTokens)
	sum.OutputTokensDetails.ReasoningTokens = addCounts(u.OutputTokensDetails.ReasoningTokens, o.OutputTokensDetails.ReasoningTokens)
	return sum
}

// clone returns a deep copy of u (nil for nil).
func (u *Usage) clone() *Usage {
	if u == nil {
		return nil
	}
	c := *u
	c.InputTokensDetails.CachedTokens = copyCount(u.InputTokensDetails.CachedTokens)
	c.OutputTokensDetails.ReasoningTokens = copyCount(u.OutputTokensDetails.ReasoningTokens)
	return &c
}

func copyCount(n *int) *int {
	if n == nil {
		return nil
	}
	c := *n
	return &c
}

func addCounts(a, b *int) *int {
	if a == nil || b == nil {
		return nil
	}
	s := *a + *b
	return &s
}

type usageWire struct {
	InputTokens         *laxInt         `json:"input_tokens"`
	InputTokensDetails  json.RawMessage `json:"input_tokens_details"`
	OutputTokens        *laxInt         `json:"output_tokens"`
	OutputTokensDetails json.RawMessage `json:"output_tokens_details"`
	TotalTokens         *laxInt         `json:"total_tokens"`
}

// UnmarshalJSON decodes a usage object, remembering absent or null
// members for validation.
func (u *Usage) UnmarshalJSON(b []byte) error { return decodeChecked(b, u) }

func (u *Usage) decodeRaw(b []byte) error {
	var w usageWire
	_, present, nulls, err := decodeObject(b, &w)
	*u = Usage{}
	if err != nil {
		return err
	}
	counts := []struct {
		n    *laxInt
		dst  *int
		wire uint64 // usageWire bit
	}{{w.InputTokens, &u.InputTokens, 1 << 0}, {w.OutputTokens, &u.OutputTokens, 1 << 2}, {w.TotalTokens, &u.TotalTokens, 1 << 4}}
	for i, c := range counts { // i is the usage* bit
		if c.n != nil {
			*c.dst = int(*c.n)
		}
		if present&c.wire == 0 {
			u.absent |= 1 << i
		} else if nulls&c.wire != 0 {
			u.null |= 1 << i
		}
	}
	var in struct {
		CachedTokens *laxInt `json:"cached_tokens"`
	}
	var out struct {
		ReasoningTokens *laxInt `json:"reasoning_tokens"`
	}
	if err := u.decodeDetails(w.InputTokensDetails, &in, usageInputDetails, usageCachedTokens); err != nil {
		return withField(err, "input_tokens_details")
	}
	if err := u.decodeDetails(w.OutputTokensDetails, &out, usageOutputDetails, usageReasoningTokens); err != nil {
		return withField(err, "output_tokens_details")
	}
	u.InputTokensDetails.CachedTokens = (*int)(in.CachedTokens)
	u.OutputTokensDetails.ReasoningTokens = (*int)(out.ReasoningTokens)
	return nil
}

// decodeDetails decodes a detail object, which must be present, an
// object, and hold its count (which may be null).
func (u *Usage) decodeDetails(raw json.RawMessage, dst any, objBit, keyBit uint8) error {
	switch {
	case len(raw) == 0:
		u.absent |= objBit
	case isNull(raw):
		u.null |= objBit
	default:
		_, present, _, err := decodeObject(raw, dst)
		if present == 0 {
			u.absent |= keyBit
		}
		return err
	}
	return nil
}

// usageChecks names, by usage* bit, each member a usage object requires:
// its location under usage, and the error kind and message of a null
// value (a count under a detail object may be null).
var usageChecks = []struct {
	loc       []any
	kind, msg string
}{
	{[]any{"input_tokens"}, ErrInt, "Input should be a valid integer"},
	{[]any{"output_tokens"}, ErrInt, "Input should be a valid integer"},
	{[]any{"total_tokens"}, ErrInt, "Input should be a valid integer"},
	{[]any{"input_tokens_details"}, ErrModelType, "Input should be a valid dictionary or object to extract fields from"},
	{[]any{"input_tokens_details", "cached_tokens"}, "", ""},
	{[]any{"output_tokens_details"}, ErrModelType, "Input should be a valid dictionary or object to extract fields from"},
	{[]any{"output_tokens_details", "reasoning_tokens"}, "", ""},
}

func (u *Usage) validate(v *validator, loc []any) {
	for i, c := range usageChecks {
		switch {
		case u.absent&(1<<i) != 0:
			v.missing(nil, at(loc, c.loc...)...)
		case u.null&(1<<i) != 0:
			v.add(c.kind, c.msg, json.RawMessage("null"), at(loc, c.loc...)...)
		}
	}
}
