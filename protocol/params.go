package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// ResponseCreateParams is the body of POST /v1/responses as NeMo Gym
// accepts it (non-streaming), and the responses_create_params of every
// dataset row. Upstream forbids unknown members: a decoded value
// remembers them and Validate reports each as extra_forbidden (HTTP 422).
//
// Optional members are pointers (or nil slices and maps): nil means the
// member was not set, and it is then left out when encoding, as upstream's
// agent leaves out unset members when it calls a model. Upstream's
// defaults apply on the reading side: ParallelToolCalls true, ToolChoice
// "auto", Tools empty (see the Effective* methods).
type ResponseCreateParams struct {
	// Input is the prompt: a string or a list of items (required).
	Input Input
	// Model names the model; any string.
	Model *string
	// Instructions is a system-level instruction.
	Instructions *string
	// Temperature and TopP are the sampling parameters.
	Temperature, TopP *float64
	// MaxOutputTokens, MaxToolCalls and TopLogprobs are limits.
	MaxOutputTokens, MaxToolCalls, TopLogprobs *int
	// ParallelToolCalls allows several function calls in one turn; nil
	// means upstream's default, true. An explicit null is refused.
	ParallelToolCalls *bool
	// ToolChoice is "none", "auto", "required" or an object; nil means
	// "auto". An explicit null is refused.
	ToolChoice *ToolChoice
	// Tools the model may call.
	Tools []Tool
	// Metadata is a string-to-string map.
	Metadata map[string]string
	// Background, Store and Stream are flags; Stream must be false or
	// unset on this path.
	Background, Store, Stream *bool
	// Include lists extra output data to include.
	Include []string
	// PreviousResponseID and User are identifiers.
	PreviousResponseID, User *string
	// ServiceTier is auto, default, flex, scale or priority.
	ServiceTier *string
	// Truncation is auto or disabled.
	Truncation *string
	// Prompt, Reasoning and Text are OpenAI parameter objects, kept as
	// they came.
	Prompt, Reasoning, Text json.RawMessage

	// unknown holds members upstream would refuse; Validate reports them.
	unknown Fields
	// present and nulls record the paramsWire members that arrived, and
	// those that were null (present also holds decodedBit).
	present, nulls uint64
}

type paramsWire struct {
	Input              *Input          `json:"input,omitempty"`
	Background         *bool           `json:"background,omitempty"`
	Include            *[]string       `json:"include,omitempty"`
	Instructions       *string         `json:"instructions,omitempty"`
	MaxOutputTokens    *int            `json:"max_output_tokens,omitempty"`
	MaxToolCalls       *int            `json:"max_tool_calls,omitempty"`
	Metadata           *stringMap      `json:"metadata,omitempty"`
	Model              *string         `json:"model,omitempty"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls,omitempty"`
	PreviousResponseID *string         `json:"previous_response_id,omitempty"`
	Prompt             json.RawMessage `json:"prompt,omitempty"`
	Reasoning          json.RawMessage `json:"reasoning,omitempty"`
	ServiceTier        *string         `json:"service_tier,omitempty"`
	Store              *bool           `json:"store,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	Text               json.RawMessage `json:"text,omitempty"`
	ToolChoice         *ToolChoice     `json:"tool_choice,omitempty"`
	Tools              *[]Tool         `json:"tools,omitempty"`
	TopLogprobs        *int            `json:"top_logprobs,omitempty"`
	TopP               *float64        `json:"top_p,omitempty"`
	Truncation         *string         `json:"truncation,omitempty"`
	User               *string         `json:"user,omitempty"`
	Stream             *bool           `json:"stream,omitempty"`
}

// stringMap is a string-to-string object whose decoding error names the
// member with the wrong value.
type stringMap map[string]string

// UnmarshalJSON decodes an object of strings.
func (m *stringMap) UnmarshalJSON(b []byte) error { return decodeChecked(b, m) }

func (m *stringMap) decodeRaw(b []byte) error {
	out := stringMap{}
	err := scanObject(b, typeStringMap, func(key string, raw []byte) error {
		s, err := decodeString(raw)
		if err != nil {
			return withField(err, key)
		}
		out[key] = s
		return nil
	})
	*m = out
	return err
}

var typeStringMap = reflect.TypeFor[map[string]string]()

// Bits of paramsWire members that the rules below look at.
const (
	paramInput             = 1 << 0
	paramParallelToolCalls = 1 << 8
	paramToolChoice        = 1 << 16
	paramTools             = 1 << 17
)

// ParamKeys lists every member ResponseCreateParams accepts, in upstream's
// declaration order.
var ParamKeys = []string{"background", "include", "input", "instructions", "max_output_tokens",
	"max_tool_calls", "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt",
	"reasoning", "service_tier", "store", "temperature", "text", "tool_choice", "tools",
	"top_logprobs", "top_p", "truncation", "user", "stream"}

// MarshalJSON encodes the members that are set: a nil pointer, slice or
// map is left out, and a non-nil one goes out even when empty (tools
// [] included), as upstream's exclude_unset dump keeps every member a
// caller set. A member that arrived as null goes back out as null.
func (p ResponseCreateParams) MarshalJSON() ([]byte, error) { return p.appendJSON(nil) }

func (p *ResponseCreateParams) appendJSON(buf []byte) ([]byte, error) {
	in := p.Input
	w := paramsWire{Input: &in, Background: p.Background, Instructions: p.Instructions,
		MaxOutputTokens: p.MaxOutputTokens, MaxToolCalls: p.MaxToolCalls,
		Model: p.Model, ParallelToolCalls: p.ParallelToolCalls, PreviousResponseID: p.PreviousResponseID,
		Prompt: nullToNil(p.Prompt), Reasoning: nullToNil(p.Reasoning), ServiceTier: p.ServiceTier,
		Store: p.Store, Temperature: p.Temperature, Text: nullToNil(p.Text), ToolChoice: p.ToolChoice,
		TopLogprobs: p.TopLogprobs, TopP: p.TopP, Truncation: p.Truncation, User: p.User,
		Stream: p.Stream}
	if p.Include != nil {
		w.Include = &p.Include
	}
	if p.Metadata != nil {
		m := stringMap(p.Metadata)
		w.Metadata = &m
	}
	if p.Tools != nil {
		w.Tools = &p.Tools
	}
	return encodeObject(buf, &w, p.unknown, p.nulls)
}

// UnmarshalJSON decodes the parameters; members upstream does not know
// are remembered for Validate, not dropped silently.
func (p *ResponseCreateParams) UnmarshalJSON(b []byte) error { return decodeChecked(b, p) }

func (p *ResponseCreateParams) decodeRaw(b []byte) error {
	var w paramsWire
	unknown, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*p = ResponseCreateParams{Background: w.Background, Instructions: w.Instructions,
		MaxOutputTokens: w.MaxOutputTokens, MaxToolCalls: w.MaxToolCalls,
		Model: w.Model, ParallelToolCalls: w.ParallelToolCalls, PreviousResponseID: w.PreviousResponseID,
		Prompt: nullToNil(w.Prompt), Reasoning: nullToNil(w.Reasoning), ServiceTier: w.ServiceTier,
		Store: w.Store, Temperature: w.Temperature, Text: nullToNil(w.Text), ToolChoice: w.ToolChoice,
		TopLogprobs: w.TopLogprobs, TopP: w.TopP, Truncation: w.Truncation, User: w.User,
		Stream: w.Stream, unknown: unknown, present: present | decodedBit, nulls: nulls}
	if w.Input != nil {
		p.Input = *w.Input
	}
	if w.Include != nil {
		p.Include = *w.Include
	}
	if w.Metadata != nil {
		p.Metadata = *w.Metadata
	}
	if w.Tools != nil {
		p.Tools = *w.Tools
	}
	return nil
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}

// Validate checks p as the body of POST /v1/responses: locations are
// relative to the parameters object ("prompt_cache_key", "input", ...).
func (p *ResponseCreateParams) Validate() error {
	var v validator
	p.validate(&v, nil, nil)
	return v.err()
}

// Unknown returns the members upstream would refuse, as they came.
func (p ResponseCreateParams) Unknown() Fields { return p.unknown }

// EffectiveParallelToolCalls is ParallelToolCalls with upstream's default.
func (p ResponseCreateParams) EffectiveParallelToolCalls() bool {
	return p.ParallelToolCalls == nil || *p.ParallelToolCalls
}

// EffectiveToolChoice is ToolChoice with upstream's default, "auto".
func (p ResponseCreateParams) EffectiveToolChoice() ToolChoice {
	if p.ToolChoice == nil {
		return ToolChoice{Mode: ToolChoiceAuto}
	}
	return *p.ToolChoice
}

// EffectiveTools is Tools, never nil.
func (p ResponseCreateParams) EffectiveTools() []Tool {
	if p.Tools == nil {
		return []Tool{}
	}
	return p.Tools
}

// Clone returns a copy whose input list and tool list can be changed
// without touching p's.
func (p ResponseCreateParams) Clone() ResponseCreateParams {
	p.Input.Items = slices.Clone(p.Input.Items)
	p.Tools = slices.Clone(p.Tools)
	return p
}

var (
	serviceTiers = []string{"auto", "default", "flex", "scale", "priority"}
	truncations  = []string{"auto", "disabled"}
)

// validate appends p's schema violations under loc; raw is p as it came
// (for the inputs of missing-member errors).
func (p *ResponseCreateParams) validate(v *validator, raw json.RawMessage, loc []any) {
	if p.present&decodedBit == 0 {
		var d ResponseCreateParams
		if b, err := json.Marshal(p); err == nil && json.Unmarshal(b, &d) == nil {
			p = &d
		}
	}
	for _, m := range p.unknown {
		v.add(ErrExtraForbidden, "Extra inputs are not permitted", m.Value, at(loc, m.Key)...)
	}
	switch {
	case p.present&paramInput == 0:
		v.missing(raw, at(loc, "input")...)
	case p.nulls&paramInput != 0:
		v.add(ErrString, "Input should be a valid string", json.RawMessage("null"), at(loc, "input")...)
	default:
		p.Input.validate(v, at(loc, "input"))
	}
	if p.nulls&paramParallelToolCalls != 0 {
		v.add(ErrBool, "Input should be a valid boolean", json.RawMessage("null"), at(loc, "parallel_tool_calls")...)
	}
	if p.nulls&paramToolChoice != 0 {
		v.add(ErrLiteral, "Input should be 'none', 'auto' or 'required'", json.RawMessage("null"), at(loc, "tool_choice")...)
	} else if p.ToolChoice != nil {
		p.ToolChoice.validate(v, at(loc, "tool_choice"))
	}
	if p.nulls&paramTools != 0 {
		v.add(ErrList, "Input should be a valid list", json.RawMessage("null"), at(loc, "tools")...)
	}
	for i := range p.Tools {
		p.Tools[i].validate(v, at(loc, "tools", i), true)
	}
	for i, s := range p.Include {
		if !slices.Contains(includables, s) {
			v.add(ErrLiteral, "Input should be one of the ResponseIncludable values", mustRaw(s), at(loc, "include", i)...)
		}
	}
	for i, obj := range []json.RawMessage{p.Prompt, p.Reasoning, p.Text} {
		if len(obj) > 0 && rawKind(obj) != "object" {
			v.add(ErrDict, "Input should be a valid dictionary", obj, at(loc, []string{"prompt", "reasoning", "text"}[i])...)
		}
	}
	literal(v, p.ServiceTier, serviceTiers, at(loc, "service_tier"))
	literal(v, p.Truncation, truncations, at(loc, "truncation"))
	if p.Stream != nil && *p.Stream {
		v.add(ErrLiteral, "Input should be False", json.RawMessage("true"), at(loc, "stream")...)
	}
}

// includables are upstream's ResponseIncludable values.
var includables = []string{"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
	"message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
	"reasoning.encrypted_content", "message.output_text.logprobs"}

// literal checks an optional enumeration member.
func literal(v *validator, s *string, allowed []string, loc []any) {
	if s == nil || slices.Contains(allowed, *s) {
		return
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = "'" + a + "'"
	}
	msg := "Input should be " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	v.add(ErrLiteral, msg, mustRaw(*s), loc...)
}

// Input is the input of a Responses request: a plain string or a list of
// items. It encodes as a list when Items is not nil, else as the string.
type Input struct {
	// Text is the input when it is a plain string.
	Text string
	// Items is the input when it is a list (non-nil, possibly empty).
	Items []Item
}

// TextInput returns a string input.
func TextInput(s string) Input { return Input{Text: s} }

// ItemsInput returns a list input.
func ItemsInput(items ...Item) Input {
	if items == nil {
		items = []Item{}
	}
	return Input{Items: items}
}

// IsText reports whether the input is a plain string.
func (in Input) IsText() bool { return in.Items == nil }

// AsItems returns the input as a list: a string becomes one short-form
// user message, as upstream's simple agent turns it into one.
func (in Input) AsItems() []Item {
	if in.Items == nil {
		return []Item{UserMessage(in.Text)}
	}
	return in.Items
}

// LastUserText is the text of the last user message of the input (the
// string itself for a string input), or "".
func (in Input) LastUserText() string {
	if in.Items == nil {
		return in.Text
	}
	for i := len(in.Items) - 1; i >= 0; i-- {
		it := in.Items[i]
		if (it.Type == "" || it.Type == TypeMessage) && it.Role == RoleUser {
			return it.Text()
		}
	}
	return ""
}

// MarshalJSON encodes a list when Items is not nil, else the string.
func (in Input) MarshalJSON() ([]byte, error) { return in.appendJSON(nil) }

func (in *Input) appendJSON(buf []byte) ([]byte, error) {
	if in.Items != nil {
		return appendValue(buf, reflect.ValueOf(&in.Items).Elem())
	}
	return appendString(buf, in.Text), nil
}

// UnmarshalJSON accepts a string or a list of items.
func (in *Input) UnmarshalJSON(b []byte) error { return decodeChecked(b, in) }

func (in *Input) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	*in = Input{}
	if len(b) > 0 && b[0] == '"' {
		s, err := decodeString(b)
		in.Text = s
		return err
	}
	if len(b) == 0 || b[0] != '[' {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeItems}
	}
	return decodeValue(b, reflect.ValueOf(&in.Items).Elem())
}

var typeItems = reflect.TypeFor[[]Item]()

func (in Input) validate(v *validator, loc []any) {
	for i, it := range in.Items {
		it.validateInput(v, at(loc, i))
	}
}

// Values of ToolChoice.Mode.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// ToolChoice is "none", "auto", "required", or an object such as
// {"type":"function","name":"get_weather"}.
type ToolChoice struct {
	// Mode is the string form; "" when Object is set.
	Mode string
	// Object is the object form, as it came.
	Object json.RawMessage
}

// MarshalJSON encodes the object form when set, else the mode string.
func (t ToolChoice) MarshalJSON() ([]byte, error) { return t.appendJSON(nil) }

func (t *ToolChoice) appendJSON(buf []byte) ([]byte, error) {
	if len(t.Object) > 0 {
		return appendValue(buf, reflect.ValueOf(&t.Object).Elem())
	}
	return appendString(buf, t.Mode), nil
}

// UnmarshalJSON accepts a string or an object.
func (t *ToolChoice) UnmarshalJSON(b []byte) error { return decodeChecked(b, t) }

func (t *ToolChoice) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	*t = ToolChoice{}
	if len(b) > 0 && b[0] == '"' {
		s, err := decodeString(b)
		t.Mode = s
		return err
	}
	if len(b) == 0 || b[0] != '{' {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeString}
	}
	t.Object = oneLine(bytes.Clone(b))
	return nil
}

// toolChoiceKeys lists, for each type of a tool_choice object, the
// members it requires besides type.
var toolChoiceKeys = map[string][]string{
	"allowed_tools": {"mode", "tools"}, "function": {"name"}, "mcp": {"server_label"}, "custom": {"name"},
	"file_search": nil, "web_search_preview": nil, "computer_use_preview": nil,
	"web_search_preview_2025_03_11": nil, "image_generation": nil, "code_interpreter": nil,
}

// validate checks a tool choice (the same union in a request and in a
// response).
func (t ToolChoice) validate(v *validator, loc []any) {
	if len(t.Object) == 0 {
		if !slices.Contains([]string{ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired}, t.Mode) {
			v.add(ErrLiteral, "Input should be 'none', 'auto' or 'required'", mustRaw(t.Mode), loc...)
		}
		return
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(t.Object, &obj)
	var typ string
	if raw, ok := obj["type"]; !ok {
		v.missing(t.Object, at(loc, "type")...)
		return
	} else if json.Unmarshal(raw, &typ) != nil {
		typ = "\x00"
	}
	required, known := toolChoiceKeys[typ]
	if !known {
		v.add(ErrValue, "Value error, unknown tool_choice type", obj["type"], at(loc, "type")...)
		return
	}
	for _, k := range required {
		if raw, ok := obj[k]; !ok || isNull(raw) {
			v.missing(t.Object, at(loc, k)...)
		}
	}
}

// Tool is one tool a model may call. Function tools are the ones the
// fleet's servers execute; other tool types are kept as they came.
type Tool struct {
	// Type is "function" for a function tool.
	Type string
	// Name of a function tool.
	Name string
	// Description of the tool, when given.
	Description *string
	// Parameters is the JSON schema of the arguments (may be null).
	Parameters json.RawMessage
	// Strict asks for strict schema adherence (may be null).
	Strict *bool
	// Extra holds every member not declared above.
	Extra Fields

	present, nulls uint64 // toolWire members that arrived, and were null
}

type toolWire struct {
	Type        string          `json:"type"`
	Name        *string         `json:"name,omitempty"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Bits of Tool.present, in toolWire's field order.
const (
	toolType = 1 << iota
	toolName
	toolDescription
	toolParameters
	toolStrict
)

// FunctionTool returns a function tool with a JSON-schema parameter
// object.
func FunctionTool(name, description string, parameters json.RawMessage) Tool {
	strict := false
	return Tool{Type: "function", Name: name, Description: &description, Parameters: parameters, Strict: &strict}
}

// MarshalJSON encodes the tool; a function tool always carries name,
// parameters and strict (null when unset), as upstream requires.
func (t Tool) MarshalJSON() ([]byte, error) { return t.appendJSON(nil) }

func (t *Tool) appendJSON(buf []byte) ([]byte, error) {
	fn := t.Type == "function"
	w := toolWire{Type: t.Type, Description: t.Description, Parameters: nullToNil(t.Parameters), Strict: t.Strict}
	if t.Name != "" || fn || t.present&^t.nulls&toolName != 0 {
		w.Name = &t.Name
	}
	nulls := t.nulls
	if fn {
		// parameters and strict may be null but must be present.
		nulls |= toolParameters | toolStrict
	}
	return encodeObject(buf, &w, t.Extra, nulls)
}

// UnmarshalJSON decodes a tool, keeping undeclared members in Extra.
func (t *Tool) UnmarshalJSON(b []byte) error { return decodeChecked(b, t) }

func (t *Tool) decodeRaw(b []byte) error {
	var w toolWire
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*t = Tool{Type: w.Type, Name: deref(w.Name), Description: w.Description, Parameters: nullToNil(w.Parameters),
		Strict: w.Strict, Extra: extra, present: present | decodedBit, nulls: nulls}
	return nil
}

// toolKeys lists, for each tool type upstream knows, the members it
// requires besides type (a function tool's parameters and strict only in
// a request).
var toolKeys = map[string][]string{
	"function": {"name"}, "file_search": {"vector_store_ids"},
	"computer_use_preview": {"display_height", "display_width", "environment"},
	"web_search":           nil, "web_search_2025_08_26": nil, "mcp": {"server_label"},
	"code_interpreter": {"container"}, "image_generation": nil, "local_shell": nil, "custom": {"name"},
	"web_search_preview": nil, "web_search_preview_2025_03_11": nil,
}

// validate checks a tool; in a request, a function tool needs every one
// of type, name, parameters and strict (the last two may be null).
func (t Tool) validate(v *validator, loc []any, request bool) {
	if t.present&decodedBit == 0 {
		var d Tool
		if b, err := json.Marshal(t); err == nil && json.Unmarshal(b, &d) == nil {
			t = d
		}
	}
	if t.present&^t.nulls&toolType == 0 {
		v.missing(nil, at(loc, "type")...)
		return
	}
	required, known := toolKeys[t.Type]
	if !known {
		v.add(ErrValue, "Value error, unknown tool type "+t.Type, mustRaw(t.Type), at(loc, "type")...)
		return
	}
	for _, k := range required {
		if k == "name" {
			if t.present&^t.nulls&toolName == 0 {
				v.missing(nil, at(loc, k)...)
			}
		} else if raw, ok := t.Extra.Get(k); !ok || isNull(raw) {
			v.missing(nil, at(loc, k)...)
		}
	}
	if t.Type != "function" {
		return
	}
	if request && t.present&toolParameters == 0 {
		v.missing(nil, at(loc, "parameters")...)
	}
	if request && t.present&toolStrict == 0 {
		v.missing(nil, at(loc, "strict")...)
	}
	if len(t.Parameters) > 0 && rawKind(t.Parameters) != "object" {
		v.add(ErrDict, "Input should be a valid dictionary", t.Parameters, at(loc, "parameters")...)
	}
}
