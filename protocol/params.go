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
	// ContextManagement (a list), Conversation (a string or an object),
	// Moderation and StreamOptions (objects) are the OpenAI parameters
	// NeMo Gym 0.7 added, kept as they came.
	ContextManagement, Conversation, Moderation, StreamOptions json.RawMessage
	// PromptCacheKey and SafetyIdentifier are identifiers;
	// PromptCacheRetention is in_memory or 24h.
	PromptCacheKey, PromptCacheRetention, SafetyIdentifier *string

	// unknown holds members upstream would refuse; Validate reports them.
	unknown Fields
	// present and nulls record the paramsWire members that arrived, and
	// those that were null (present also holds decodedBit).
	present, nulls uint64
}

type paramsWire struct {
	Input              *Input          `json:"input,omitempty"`
	Background         *laxBool        `json:"background,omitempty"`
	Include            *[]string       `json:"include,omitempty"`
	Instructions       *string         `json:"instructions,omitempty"`
	MaxOutputTokens    *laxInt         `json:"max_output_tokens,omitempty"`
	MaxToolCalls       *laxInt         `json:"max_tool_calls,omitempty"`
	Metadata           *stringMap      `json:"metadata,omitempty"`
	Model              *string         `json:"model,omitempty"`
	ParallelToolCalls  *laxBool        `json:"parallel_tool_calls,omitempty"`
	PreviousResponseID *string         `json:"previous_response_id,omitempty"`
	Prompt             json.RawMessage `json:"prompt,omitempty"`
	Reasoning          json.RawMessage `json:"reasoning,omitempty"`
	ServiceTier        *string         `json:"service_tier,omitempty"`
	Store              *laxBool        `json:"store,omitempty"`
	Temperature        *laxFloat64     `json:"temperature,omitempty"`
	Text               json.RawMessage `json:"text,omitempty"`
	ToolChoice         *ToolChoice     `json:"tool_choice,omitempty"`
	Tools              *[]Tool         `json:"tools,omitempty"`
	TopLogprobs        *laxInt         `json:"top_logprobs,omitempty"`
	TopP               *laxFloat64     `json:"top_p,omitempty"`
	Truncation         *string         `json:"truncation,omitempty"`
	User               *string         `json:"user,omitempty"`
	Stream             *falseFlag      `json:"stream,omitempty"`
	// The members added by openai 2.44, after the older ones so that the
	// bits above keep their places.
	ContextManagement    json.RawMessage `json:"context_management,omitempty"`
	Conversation         json.RawMessage `json:"conversation,omitempty"`
	Moderation           json.RawMessage `json:"moderation,omitempty"`
	PromptCacheKey       *string         `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention *string         `json:"prompt_cache_retention,omitempty"`
	SafetyIdentifier     *string         `json:"safety_identifier,omitempty"`
	StreamOptions        json.RawMessage `json:"stream_options,omitempty"`
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
	"reasoning", "service_tier", "store", "context_management", "conversation", "moderation",
	"prompt_cache_key", "prompt_cache_retention", "safety_identifier", "stream_options", "temperature",
	"text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user", "stream"}

// MarshalJSON encodes the members that are set: a nil pointer, slice or
// map is left out, and a non-nil one goes out even when empty (tools
// [] included), as upstream's exclude_unset dump keeps every member a
// caller set. A member that arrived as null goes back out as null.
func (p ResponseCreateParams) MarshalJSON() ([]byte, error) { return p.appendJSON(nil) }

func (p *ResponseCreateParams) appendJSON(buf []byte) ([]byte, error) {
	in := p.Input
	w := paramsWire{Input: &in, Background: (*laxBool)(p.Background), Instructions: p.Instructions,
		MaxOutputTokens: (*laxInt)(p.MaxOutputTokens), MaxToolCalls: (*laxInt)(p.MaxToolCalls),
		Model: p.Model, ParallelToolCalls: (*laxBool)(p.ParallelToolCalls), PreviousResponseID: p.PreviousResponseID,
		Prompt: nullToNil(p.Prompt), Reasoning: nullToNil(p.Reasoning), ServiceTier: p.ServiceTier,
		Store: (*laxBool)(p.Store), Temperature: (*laxFloat64)(p.Temperature), Text: nullToNil(p.Text), ToolChoice: p.ToolChoice,
		TopLogprobs: (*laxInt)(p.TopLogprobs), TopP: (*laxFloat64)(p.TopP), Truncation: p.Truncation, User: p.User,
		Stream: (*falseFlag)(p.Stream), ContextManagement: nullToNil(p.ContextManagement), Conversation: nullToNil(p.Conversation),
		Moderation: nullToNil(p.Moderation), PromptCacheKey: p.PromptCacheKey, PromptCacheRetention: p.PromptCacheRetention,
		SafetyIdentifier: p.SafetyIdentifier, StreamOptions: nullToNil(p.StreamOptions)}
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
	*p = ResponseCreateParams{Background: (*bool)(w.Background), Instructions: w.Instructions,
		MaxOutputTokens: (*int)(w.MaxOutputTokens), MaxToolCalls: (*int)(w.MaxToolCalls),
		Model: w.Model, ParallelToolCalls: (*bool)(w.ParallelToolCalls), PreviousResponseID: w.PreviousResponseID,
		Prompt: nullToNil(w.Prompt), Reasoning: nullToNil(w.Reasoning), ServiceTier: w.ServiceTier,
		Store: (*bool)(w.Store), Temperature: (*float64)(w.Temperature), Text: nullToNil(w.Text), ToolChoice: w.ToolChoice,
		TopLogprobs: (*int)(w.TopLogprobs), TopP: (*float64)(w.TopP), Truncation: w.Truncation, User: w.User,
		Stream: (*bool)(w.Stream), ContextManagement: nullToNil(w.ContextManagement), Conversation: nullToNil(w.Conversation),
		Moderation: nullToNil(w.Moderation), PromptCacheKey: w.PromptCacheKey, PromptCacheRetention: w.PromptCacheRetention,
		SafetyIdentifier: w.SafetyIdentifier, StreamOptions: nullToNil(w.StreamOptions),
		unknown: unknown, present: present | decodedBit, nulls: nulls}
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
	// cacheRetentions are the values of prompt_cache_retention.
	cacheRetentions = []string{"in_memory", "24h"}
)

// Shapes of the OpenAI parameter objects a request carries raw. They are
// TypedDicts inside a model that forbids extra members, so they forbid
// them too.
var (
	// promptShape is ResponsePromptParam; a variable is a string or an
	// input text, image or file part.
	promptShape = object(true, "id!", strShape, "variables", nullable(&shape{kind: shapeDict, elem: union(strShape,
		forbidding(inputTextPart), forbidding(inputImagePart), forbidding(inputFilePart))}), "version", optStr)
	reasoningShape = object(true, "context", optLit("auto", "current_turn", "all_turns"),
		"effort", optLit("none", "minimal", "low", "medium", "high", "xhigh"),
		"generate_summary", optLit("auto", "concise", "detailed"), "summary", optLit("auto", "concise", "detailed"))
	textShape              = object(true, "format", textFormatParam, "verbosity", optLit("low", "medium", "high"))
	contextManagementShape = listOf(object(true, "type!", strShape, "compact_threshold", optInt))
	conversationShape      = union(strShape, object(true, "id!", strShape))
	moderationShape        = object(true, "model!", strShape)
	streamOptionsShape     = object(true, "include_obfuscation", boolShape)
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
		p.ToolChoice.validate(v, at(loc, "tool_choice"), true)
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
	for _, m := range []struct {
		raw json.RawMessage
		key string
		s   *shape
	}{{p.Prompt, "prompt", promptShape}, {p.Reasoning, "reasoning", reasoningShape}, {p.Text, "text", textShape},
		{p.ContextManagement, "context_management", contextManagementShape}, {p.Conversation, "conversation", conversationShape},
		{p.Moderation, "moderation", moderationShape}, {p.StreamOptions, "stream_options", streamOptionsShape}} {
		if len(m.raw) > 0 {
			m.s.check(v, m.raw, at(loc, m.key))
		}
	}
	literal(v, p.ServiceTier, serviceTiers, at(loc, "service_tier"))
	literal(v, p.Truncation, truncations, at(loc, "truncation"))
	literal(v, p.PromptCacheRetention, cacheRetentions, at(loc, "prompt_cache_retention"))
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

// toolChoiceShapes returns the object forms of a tool choice: the
// request's TypedDicts forbid members they do not declare, the
// response's models keep them.
func toolChoiceShapes(forbid bool) *shape {
	return union(lit(ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired),
		object(forbid, "mode!", lit("auto", "required"), "tools!", iterableShape, "type!", lit("allowed_tools")),
		object(forbid, "type!", lit("file_search", "web_search_preview", "computer", "computer_use_preview", "computer_use",
			"web_search_preview_2025_03_11", "image_generation", "code_interpreter")),
		object(forbid, "name!", strShape, "type!", lit("function")),
		object(forbid, "server_label!", strShape, "type!", lit("mcp"), "name", optStr),
		object(forbid, "name!", strShape, "type!", lit("custom")),
		object(forbid, "type!", lit("apply_patch")),
		object(forbid, "type!", lit("shell")))
}

var (
	requestToolChoice  = toolChoiceShapes(true)
	responseToolChoice = toolChoiceShapes(false)
)

// validate checks a tool choice: in a request against the request's
// union, else against the response's.
func (t ToolChoice) validate(v *validator, loc []any, request bool) {
	s := responseToolChoice
	if request {
		s = requestToolChoice
	}
	if len(t.Object) == 0 {
		s.check(v, appendString(nil, t.Mode), loc)
		return
	}
	s.check(v, t.Object, loc)
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

	present, nulls uint64          // toolWire members that arrived, and were null
	raw            json.RawMessage // the tool as it came, for validation
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
	if t.Name != "" || fn && !t.Extra.Has("name") || t.present&^t.nulls&toolName != 0 {
		w.Name = &t.Name
	}
	nulls := t.nulls
	if fn {
		// parameters and strict may be null but must be present.
		nulls |= toolParameters
		if !t.Extra.Has("strict") {
			nulls |= toolStrict
		}
	}
	return encodeObject(buf, &w, t.Extra, nulls)
}

// UnmarshalJSON decodes a tool, keeping undeclared members in Extra.
func (t *Tool) UnmarshalJSON(b []byte) error { return decodeChecked(b, t) }

func (t *Tool) decodeRaw(b []byte) error {
	var w toolDecodeWire
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*t = Tool{Parameters: nullToNil(w.Parameters), Extra: extra, nulls: nulls, raw: oneLine(bytes.Clone(bytes.TrimSpace(b)))}
	// A member of another kind than the struct gives it stays in Extra,
	// as it came, for validation to report.
	for _, m := range []struct {
		src *laxString
		bit uint64
		key string
	}{{&w.Type, toolType, "type"}, {&w.Name, toolName, "name"}, {&w.Description, toolDescription, "description"}} {
		switch {
		case present&^nulls&m.bit == 0:
		case m.src.other != nil:
			present &^= m.bit
			t.Extra = append(t.Extra, Field{Key: m.key, Value: m.src.other})
		case m.bit == toolType:
			t.Type = m.src.s
		case m.bit == toolName:
			t.Name = m.src.s
		default:
			d := m.src.s
			t.Description = &d
		}
	}
	if present&^nulls&toolStrict != 0 {
		switch raw := bytes.TrimSpace(w.Strict); raw[0] {
		case 't', 'f':
			strict := raw[0] == 't'
			t.Strict = &strict
		default:
			present &^= toolStrict
			t.Extra = append(t.Extra, Field{Key: "strict", Value: oneLine(bytes.Clone(raw))})
		}
	}
	t.present = present | decodedBit
	return nil
}

// toolDecodeWire is toolWire as it is decoded: the same members in the
// same order, each read leniently.
type toolDecodeWire struct {
	Type        laxString       `json:"type"`
	Name        laxString       `json:"name,omitempty"`
	Description laxString       `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      json.RawMessage `json:"strict,omitempty"`
}

// iterableShape is an Iterable member of a TypedDict: pydantic checks
// only that the value can be iterated (a string, a list or an object),
// and leaves its elements to whoever iterates it.
var iterableShape = union(strShape, listAny, objAny)

// forbidding returns a copy of the object shape s that refuses members
// it does not declare: a TypedDict under a model that forbids them.
func forbidding(s *shape) *shape {
	c := *s
	c.forbid = true
	return &c
}

// Nested TypedDicts of the request tools (openai 2.44's
// openai/types/responses/*_param.py and shared_params/*.py).
var (
	// textFormatParam is ResponseFormatTextConfigParam.
	textFormatParam = union(object(true, "type!", lit("text")),
		object(true, "name!", strShape, "schema!", objAny, "type!", lit("json_schema"), "description", strShape, "strict", optBool),
		object(true, "type!", lit("json_object")))
	// fileSearchFilters are ComparisonFilter and CompoundFilter (whose
	// filters are an Iterable).
	fileSearchFilters = union(
		object(true, "key!", strShape, "type!", lit("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"),
			"value!", union(strShape, floatShape, boolShape, listOf(union(strShape, floatShape)))),
		object(true, "filters!", iterableShape, "type!", lit("and", "or")))
	rankingOptions = object(true, "hybrid_search", object(true, "embedding_weight!", floatShape, "text_weight!", floatShape),
		"ranker", lit("auto", "default-2024-11-15"), "score_threshold", floatShape)
	webSearchFilters = object(true, "allowed_domains", nullable(listOfStr))
	// webSearchLocation is web_search_tool_param.py's UserLocation; the
	// preview tool's requires its type.
	webSearchLocation = object(true, "city", optStr, "country", optStr, "region", optStr, "timezone", optStr,
		"type", lit("approximate"))
	previewLocation = object(true, "type!", lit("approximate"), "city", optStr, "country", optStr, "region", optStr,
		"timezone", optStr)
	mcpToolFilter = object(true, "read_only", boolShape, "tool_names", listOfStr)
	mcpConnectors = lit("connector_dropbox", "connector_gmail", "connector_googlecalendar", "connector_googledrive",
		"connector_microsoftteams", "connector_outlookcalendar", "connector_outlookemail", "connector_sharepoint")
	networkPolicy = union(object(true, "type!", lit("disabled")),
		object(true, "allowed_domains!", listOfStr, "type!", lit("allowlist"), "domain_secrets", iterableShape))
	codeContainer = union(strShape, object(true, "type!", lit("auto"), "file_ids", listOfStr,
		"memory_limit", optLit("1g", "4g", "16g", "64g"), "network_policy", networkPolicy))
	// customToolFormat is CustomToolInputFormat.
	customToolFormat = union(object(true, "type!", lit("text")),
		object(true, "definition!", strShape, "syntax!", lit("lark", "regex"), "type!", lit("grammar")))
)

// requestTools are the tool TypedDicts of a request (they forbid
// members they do not declare), nested TypedDicts included; members
// openai declares Iterable (skills, a namespace's tools, a compound
// filter's filters) are checked to be iterable only, as pydantic does.
var requestTools = union(
	object(true, "name!", strShape, "parameters!", optObjAny, "strict!", optBool, "type!", lit("function"),
		"defer_loading", boolShape, "description", optStr),
	object(true, "type!", lit("file_search"), "vector_store_ids!", listOfStr, "filters", nullable(fileSearchFilters),
		"max_num_results", intShape, "ranking_options", rankingOptions),
	object(true, "type!", lit("computer")),
	object(true, "display_height!", intShape, "display_width!", intShape,
		"environment!", lit("windows", "mac", "linux", "ubuntu", "browser"), "type!", lit("computer_use_preview")),
	object(true, "type!", lit("web_search", "web_search_2025_08_26"), "filters", nullable(webSearchFilters),
		"search_context_size", lit("low", "medium", "high"), "user_location", nullable(webSearchLocation)),
	object(true, "server_label!", strShape, "type!", lit("mcp"), "allowed_tools", nullable(union(listOfStr, mcpToolFilter)),
		"authorization", strShape, "connector_id", mcpConnectors, "defer_loading", boolShape, "headers", nullable(strMapShape),
		"require_approval", nullable(union(object(true, "always", mcpToolFilter, "never", mcpToolFilter), lit("always", "never"))),
		"server_description", strShape,
		"server_url", strShape, "tunnel_id", strShape),
	object(true, "container!", codeContainer, "type!", lit("code_interpreter")),
	object(true, "type!", lit("image_generation"), "action", lit("generate", "edit", "auto"),
		"background", lit("transparent", "opaque", "auto"), "input_fidelity", optLit("high", "low"),
		"input_image_mask", object(true, "file_id", strShape, "image_url", strShape), "model", strShape, "moderation", lit("auto", "low"), "output_compression", intShape,
		"output_format", lit("png", "webp", "jpeg"), "partial_images", intShape, "quality", lit("low", "medium", "high", "auto"),
		"size", strShape),
	object(true, "type!", lit("local_shell")),
	object(true, "type!", lit("shell"), "environment", nullable(union(
		object(true, "type!", lit("container_auto"), "file_ids", listOfStr, "memory_limit", optLit("1g", "4g", "16g", "64g"),
			"network_policy", networkPolicy, "skills", iterableShape),
		object(true, "type!", lit("local"), "skills", iterableShape),
		object(true, "container_id!", strShape, "type!", lit("container_reference"))))),
	object(true, "name!", strShape, "type!", lit("custom"), "defer_loading", boolShape, "description", strShape, "format", customToolFormat),
	object(true, "description!", strShape, "name!", strShape, "tools!", iterableShape, "type!", lit("namespace")),
	object(true, "type!", lit("tool_search"), "description", optStr, "execution", lit("server", "client"), "parameters", anyShape),
	object(true, "type!", lit("web_search_preview", "web_search_preview_2025_03_11"),
		"search_content_types", listOf(lit("text", "image")), "search_context_size", lit("low", "medium", "high"),
		"user_location", nullable(previewLocation)),
	object(true, "type!", lit("apply_patch")))

// responseTools are the tool models of a response (openai 2.44's
// openai/types/responses/tool.py), nested models included, member by
// member; they keep members they do not declare, and take null for every
// optional member.
var responseTools = union(
	object(false, "name!", strShape, "type!", lit("function"), "parameters", optObjAny, "strict", optBool,
		"defer_loading", optBool, "description", optStr),
	object(false, "type!", lit("file_search"), "vector_store_ids!", listOfStr, "filters", nullable(union(
		object(false, "key!", strShape, "type!", lit("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"),
			"value!", union(strShape, floatShape, boolShape, listOf(union(strShape, floatShape)))),
		// A compound filter's filters are List[Union[ComparisonFilter,
		// object]]: any list.
		object(false, "filters!", listAny, "type!", lit("and", "or")))),
		"max_num_results", optInt, "ranking_options", nullable(object(false,
			"hybrid_search", nullable(object(false, "embedding_weight!", floatShape, "text_weight!", floatShape)),
			"ranker", optLit("auto", "default-2024-11-15"), "score_threshold", optFloat))),
	object(false, "type!", lit("computer")),
	object(false, "display_height!", intShape, "display_width!", intShape,
		"environment!", lit("windows", "mac", "linux", "ubuntu", "browser"), "type!", lit("computer_use_preview")),
	object(false, "type!", lit("web_search", "web_search_2025_08_26"),
		"filters", nullable(object(false, "allowed_domains", nullable(listOfStr))),
		"search_context_size", optLit("low", "medium", "high"), "user_location", nullable(object(false,
			"city", optStr, "country", optStr, "region", optStr, "timezone", optStr, "type", optLit("approximate")))),
	object(false, "server_label!", strShape, "type!", lit("mcp"), "allowed_tools", nullable(union(listOfStr, mcpToolFilterModel)),
		"authorization", optStr, "connector_id", nullable(mcpConnectors), "defer_loading", optBool, "headers", nullable(strMapShape),
		"require_approval", nullable(union(object(false, "always", nullable(mcpToolFilterModel), "never", nullable(mcpToolFilterModel)),
			lit("always", "never"))),
		"server_description", optStr, "server_url", optStr, "tunnel_id", optStr),
	object(false, "container!", union(strShape, object(false, "type!", lit("auto"), "file_ids", nullable(listOfStr),
		"memory_limit", optLit("1g", "4g", "16g", "64g"), "network_policy", nullable(networkPolicyModel))), "type!", lit("code_interpreter")),
	object(false, "type!", lit("image_generation"), "action", optLit("generate", "edit", "auto"),
		"background", optLit("transparent", "opaque", "auto"), "input_fidelity", optLit("high", "low"),
		"input_image_mask", nullable(object(false, "file_id", optStr, "image_url", optStr)), "model", optStr,
		"moderation", optLit("auto", "low"), "output_compression", optInt, "output_format", optLit("png", "webp", "jpeg"),
		"partial_images", optInt, "quality", optLit("low", "medium", "high", "auto"), "size", optStr),
	object(false, "type!", lit("local_shell")),
	object(false, "type!", lit("shell"), "environment", nullable(union(
		object(false, "type!", lit("container_auto"), "file_ids", nullable(listOfStr), "memory_limit", optLit("1g", "4g", "16g", "64g"),
			"network_policy", nullable(networkPolicyModel), "skills", nullable(listOf(union(
				object(false, "skill_id!", strShape, "type!", lit("skill_reference"), "version", optStr),
				object(false, "description!", strShape, "name!", strShape, "source!", object(false, "data!", strShape,
					"media_type!", lit("application/zip"), "type!", lit("base64")), "type!", lit("inline")))))),
		object(false, "type!", lit("local"), "skills", nullable(listOf(object(false, "description!", strShape, "name!", strShape,
			"path!", strShape)))),
		object(false, "container_id!", strShape, "type!", lit("container_reference"))))),
	customToolModel,
	object(false, "description!", strShape, "name!", strShape, "tools!", listOf(union(
		object(false, "name!", strShape, "type!", lit("function"), "defer_loading", optBool, "description", optStr,
			"parameters", anyShape, "strict", optBool),
		customToolModel)),
		"type!", lit("namespace")),
	object(false, "type!", lit("tool_search"), "description", optStr, "execution", optLit("server", "client"), "parameters", anyShape),
	object(false, "type!", lit("web_search_preview", "web_search_preview_2025_03_11"),
		"search_content_types", nullable(listOf(lit("text", "image"))), "search_context_size", optLit("low", "medium", "high"),
		"user_location", nullable(object(false, "type!", lit("approximate"), "city", optStr, "country", optStr, "region", optStr,
			"timezone", optStr))),
	object(false, "type!", lit("apply_patch")))

// Nested models of the response tools that more than one tool shares.
var (
	mcpToolFilterModel = object(false, "read_only", optBool, "tool_names", nullable(listOfStr))
	networkPolicyModel = union(object(false, "type!", lit("disabled")),
		object(false, "allowed_domains!", listOfStr, "type!", lit("allowlist"), "domain_secrets", nullable(listOf(
			object(false, "domain!", strShape, "name!", strShape, "value!", strShape)))))
	customToolModel = object(false, "name!", strShape, "type!", lit("custom"), "defer_loading", optBool, "description", optStr,
		"format", nullable(union(object(false, "type!", lit("text")),
			object(false, "definition!", strShape, "syntax!", lit("lark", "regex"), "type!", lit("grammar")))))
)

// deferLoadingNull is upstream's replay rule for a request tool: a
// defer_loading of null becomes false before validation.
var deferLoadingNull = []byte(`"defer_loading"`)

// validate checks a tool against the request's union or the response's.
func (t Tool) validate(v *validator, loc []any, request bool) {
	if t.present&decodedBit == 0 {
		var d Tool
		if b, err := json.Marshal(t); err == nil && json.Unmarshal(b, &d) == nil {
			t = d
		}
	}
	s := responseTools
	if request {
		s = requestTools
	}
	raw := t.raw
	if request && bytes.Contains(raw, deferLoadingNull) {
		if dl, ok := t.Extra.Get("defer_loading"); ok && isNull(dl) {
			var obj Fields
			if obj.UnmarshalJSON(raw) == nil {
				obj.SetRaw("defer_loading", json.RawMessage("false"))
				raw, _ = obj.MarshalJSON()
			}
		}
	}
	s.check(v, raw, loc)
}
