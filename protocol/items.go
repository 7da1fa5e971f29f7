package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Item types of the Responses API that the fleet's own servers produce or
// read. Any other type an upstream server sends (hosted tool calls and
// the like) is carried through with its members intact.
const (
	TypeMessage            = "message"
	TypeFunctionCall       = "function_call"
	TypeFunctionCallOutput = "function_call_output"
	TypeReasoning          = "reasoning"
)

// Content part types.
const (
	PartInputText  = "input_text"
	PartOutputText = "output_text"
	PartRefusal    = "refusal"
	PartSummary    = "summary_text"
	PartReasoning  = "reasoning_text"
)

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
)

// Item statuses.
const (
	StatusCompleted  = "completed"
	StatusInProgress = "in_progress"
	StatusIncomplete = "incomplete"
)

// otherItemTypes are the hosted-tool and reference item types that the
// Responses API defines and NeMo Gym accepts as input or output items.
// They are passed through untouched.
var otherItemTypes = map[string]bool{
	"mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true,
	"web_search_call": true, "file_search_call": true, "computer_call": true, "computer_call_output": true,
	"code_interpreter_call": true, "image_generation_call": true, "local_shell_call": true,
	"local_shell_call_output": true, "custom_tool_call": true, "custom_tool_call_output": true,
	"item_reference": true,
}

// Item is one item of a Responses API input or output list: a message, a
// function call, a function call's output, a reasoning item, or any
// other item type (kept as it came). Members the struct does not declare
// (token ids for training, hosted-tool fields, ...) are kept in Extra,
// and a declared member that arrived as null goes back out as null.
type Item struct {
	// Type is the item type; "" only for an input item written in the
	// short form that omits it (upstream defaults a message's to
	// "message").
	Type string
	// ID is the item's id (required on output messages and reasoning).
	ID string
	// Role is a message's author.
	Role string
	// Status is the item's status, when it has one.
	Status string
	// Content is a message's content: a string (input messages only) or
	// a list of parts. Reasoning items may carry reasoning_text parts.
	Content *Content
	// CallID, Name and Arguments describe a function call; Arguments is
	// the JSON-encoded argument object, as a string.
	CallID, Name, Arguments string
	// Output is a function call output's text. An output in the list
	// form (or any other non-string output) is kept in Extra.
	Output string
	// Summary holds a reasoning item's summary parts.
	Summary []Part
	// Extra holds every member not declared above.
	Extra Fields

	// present records which declared members arrived with a value
	// (itemWire bits, plus decodedBit); nulls, which arrived as null.
	present, nulls uint64
}

// itemWire is Item as it travels.
type itemWire struct {
	Type      *string         `json:"type,omitempty"`
	ID        *string         `json:"id,omitempty"`
	Role      *string         `json:"role,omitempty"`
	Status    *string         `json:"status,omitempty"`
	Content   *Content        `json:"content,omitempty"`
	CallID    *string         `json:"call_id,omitempty"`
	Name      *string         `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Summary   *[]Part         `json:"summary,omitempty"`
}

// Bits of Item.present, in itemWire's field order.
const (
	itemType = 1 << iota
	itemID
	itemRole
	itemStatus
	itemContent
	itemCallID
	itemName
	itemArguments
	itemOutput
	itemSummary
)

// MarshalJSON encodes the item with exactly the members it has: those
// that arrived (an empty string included), those set in Go, and the
// members its type requires (a function call's call_id, name and
// arguments, a function call output's call_id and output, a reasoning
// item's id and summary), even when empty.
func (it Item) MarshalJSON() ([]byte, error) { return it.appendJSON(nil) }

func (it *Item) appendJSON(buf []byte) ([]byte, error) {
	fc, fco, rs := it.Type == TypeFunctionCall, it.Type == TypeFunctionCallOutput, it.Type == TypeReasoning
	str := func(s *string, bit uint64, required bool) *string {
		if *s != "" || required || it.present&bit != 0 {
			return s
		}
		return nil
	}
	w := itemWire{Type: str(&it.Type, itemType, false), ID: str(&it.ID, itemID, rs),
		Role: str(&it.Role, itemRole, false), Status: str(&it.Status, itemStatus, false), Content: it.Content,
		CallID: str(&it.CallID, itemCallID, fc || fco), Name: str(&it.Name, itemName, fc),
		Arguments: str(&it.Arguments, itemArguments, fc)}
	if (it.Output != "" || fco || it.present&itemOutput != 0) && !it.Extra.Has("output") {
		w.Output = mustRaw(it.Output)
	}
	if it.Summary != nil || rs || it.present&itemSummary != 0 {
		s := it.Summary
		if s == nil {
			s = []Part{}
		}
		w.Summary = &s
	}
	return encodeObject(buf, &w, it.Extra, it.nulls)
}

// UnmarshalJSON decodes an item, keeping undeclared members in Extra. A
// function_call_output whose output is not a string (the list form) is
// kept whole in Extra.
func (it *Item) UnmarshalJSON(b []byte) error { return decodeChecked(b, it) }

func (it *Item) decodeRaw(b []byte) error {
	var w itemWire
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*it = Item{Type: deref(w.Type), ID: deref(w.ID), Role: deref(w.Role), Status: deref(w.Status),
		Content: w.Content, CallID: deref(w.CallID), Name: deref(w.Name), Arguments: deref(w.Arguments),
		Extra: extra, present: present&^nulls | decodedBit, nulls: nulls}
	if w.Summary != nil {
		it.Summary = *w.Summary
	}
	if it.present&itemOutput != 0 {
		raw := bytes.TrimSpace(w.Output)
		if raw[0] == '"' {
			s, err := decodeString(raw)
			if err != nil {
				return err
			}
			it.Output = s
		} else {
			it.present &^= itemOutput
			it.Extra = append(it.Extra, Field{Key: "output", Value: oneLine(raw)})
		}
	}
	return nil
}

// deref returns *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var typeItemWire = reflect.TypeFor[itemWire]()

// Has reports whether the named member arrived, with a value other than
// null, when the item was decoded: "type", "id", "role", "status",
// "content", "call_id", "name", "arguments", "output" (a string output)
// or "summary".
func (it Item) Has(member string) bool {
	i, ok := keysOf(typeItemWire)[member]
	return ok && it.present&(1<<i) != 0
}

// Text joins the text of the item's content: the string of a short
// content, or the text of every text part (input_text, output_text).
func (it Item) Text() string {
	if it.Content == nil {
		return ""
	}
	return it.Content.JoinText("")
}

// UserMessage returns a short-form user input message, as upstream's
// agent builds one from a string input.
func UserMessage(text string) Item {
	return Item{Role: RoleUser, Content: &Content{Text: text}}
}

// AssistantMessage returns an output message holding one output_text
// part.
func AssistantMessage(id, text string) Item {
	return Item{Type: TypeMessage, ID: id, Role: RoleAssistant, Status: StatusCompleted,
		Content: &Content{Parts: []Part{OutputText(text)}}}
}

// FunctionCall returns a function_call output item; arguments is the
// JSON-encoded argument object.
func FunctionCall(id, callID, name, arguments string) Item {
	return Item{Type: TypeFunctionCall, ID: id, CallID: callID, Name: name, Arguments: arguments,
		Status: StatusCompleted}
}

// FunctionCallOutput returns the item that answers a function call.
func FunctionCallOutput(callID, output string) Item {
	return Item{Type: TypeFunctionCallOutput, CallID: callID, Output: output}
}

// Content is a message's content: a plain string, or a list of parts.
// It encodes as a list when Parts is not nil, else as the string Text.
type Content struct {
	// Text is the content when it is a plain string.
	Text string
	// Parts is the content when it is a list (non-nil, possibly empty).
	Parts []Part
}

// MarshalJSON encodes a list when Parts is not nil, else a string.
func (c Content) MarshalJSON() ([]byte, error) { return c.appendJSON(nil) }

func (c *Content) appendJSON(buf []byte) ([]byte, error) {
	if c.Parts != nil {
		return appendValue(buf, reflect.ValueOf(&c.Parts).Elem())
	}
	return appendString(buf, c.Text), nil
}

// UnmarshalJSON accepts a string or a list of parts.
func (c *Content) UnmarshalJSON(b []byte) error { return decodeChecked(b, c) }

func (c *Content) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = Content{}
	if len(b) > 0 && b[0] == '"' {
		s, err := decodeString(b)
		c.Text = s
		return err
	}
	if len(b) == 0 || b[0] != '[' {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeParts}
	}
	return decodeValue(b, reflect.ValueOf(&c.Parts).Elem())
}

var typeParts = reflect.TypeFor[[]Part]()

// JoinText returns the string content, or the text of every text part
// (input_text, output_text) joined with sep.
func (c Content) JoinText(sep string) string {
	if c.Parts == nil {
		return c.Text
	}
	var b []byte
	n := 0
	for _, p := range c.Parts {
		if p.Type == PartOutputText || p.Type == PartInputText {
			if n > 0 {
				b = append(b, sep...)
			}
			b = append(b, p.Text...)
			n++
		}
	}
	return string(b)
}

// Part is one content part: input_text, output_text, refusal, and the
// like. Members it does not declare (image URLs, files, ...) are kept in
// Extra, and a declared member that arrived as null goes back out as
// null.
type Part struct {
	// Type is the part type.
	Type string
	// Text is the text of a text part.
	Text string
	// Annotations of an output_text part; they encode as [] when nil,
	// since upstream requires the list.
	Annotations []json.RawMessage
	// Logprobs of an output_text part, when the model sent them.
	Logprobs json.RawMessage
	// Refusal is the text of a refusal part.
	Refusal string
	// Extra holds every member not declared above.
	Extra Fields

	present, nulls uint64 // partWire members that arrived, and were null
}

// Bits of Part.present, in partWire's field order.
const (
	partType = 1 << iota
	partText
	partAnnotations
	partLogprobs
	partRefusal
)

type partWire struct {
	Type        *string            `json:"type,omitempty"`
	Text        *string            `json:"text,omitempty"`
	Annotations *[]json.RawMessage `json:"annotations,omitempty"`
	Logprobs    json.RawMessage    `json:"logprobs,omitempty"`
	Refusal     *string            `json:"refusal,omitempty"`
}

// OutputText returns an output_text part.
func OutputText(text string) Part { return Part{Type: PartOutputText, Text: text} }

// MarshalJSON encodes the part with the members it has; an output_text
// part always carries text and annotations, a refusal part its refusal,
// and the other text parts their text.
func (p Part) MarshalJSON() ([]byte, error) { return p.appendJSON(nil) }

func (p *Part) appendJSON(buf []byte) ([]byte, error) {
	w := partWire{Logprobs: p.Logprobs}
	if p.Type != "" || p.present&partType != 0 {
		w.Type = &p.Type
	}
	textual := p.Type == PartOutputText || p.Type == PartInputText || p.Type == PartSummary || p.Type == PartReasoning
	if p.Text != "" || textual || p.present&partText != 0 {
		w.Text = &p.Text
	}
	if p.Refusal != "" || p.Type == PartRefusal || p.present&partRefusal != 0 {
		w.Refusal = &p.Refusal
	}
	a := p.Annotations
	if a == nil && p.Type == PartOutputText {
		a = []json.RawMessage{}
	}
	if a != nil || p.present&partAnnotations != 0 {
		w.Annotations = &a
	}
	return encodeObject(buf, &w, p.Extra, p.nulls)
}

// UnmarshalJSON decodes a part, keeping undeclared members in Extra.
func (p *Part) UnmarshalJSON(b []byte) error { return decodeChecked(b, p) }

func (p *Part) decodeRaw(b []byte) error {
	var w partWire
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*p = Part{Type: deref(w.Type), Text: deref(w.Text), Logprobs: w.Logprobs, Refusal: deref(w.Refusal),
		Extra: extra, present: present&^nulls | decodedBit, nulls: nulls}
	if w.Annotations != nil {
		p.Annotations = *w.Annotations
	}
	if nulls&partLogprobs != 0 {
		p.present |= partLogprobs // Logprobs holds the null itself
		p.nulls &^= partLogprobs
	}
	return nil
}

// Members a training variant of an item carries; if any is present, the
// first three must all be.
var tokenFields = []string{"prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts"}

var (
	itemStatuses     = []string{StatusInProgress, StatusCompleted, StatusIncomplete}
	inputRoles       = []string{RoleUser, RoleAssistant, RoleSystem, RoleDeveloper}
	imageDetails     = []string{"low", "high", "auto"}
	annotationTypes  = []string{"file_citation", "url_citation", "container_file_citation", "file_path"}
	inputPartTypes   = []string{PartInputText, "input_image", "input_file", "input_video"}
	outputPartTypes  = []string{PartOutputText, PartRefusal}
	typeIntList      = reflect.TypeFor[[]int]()
	typeFloatList    = reflect.TypeFor[[]float64]()
	typeExpertsValue = reflect.TypeFor[[][][]int]()
)

// decoded returns it as upstream would read it: it itself when it was
// decoded, else it encoded and decoded again, so that an item built in
// Go is checked as it would travel.
func (it Item) decoded() Item {
	if it.present&decodedBit != 0 {
		return it
	}
	var d Item
	if b, err := json.Marshal(it); err == nil && json.Unmarshal(b, &d) == nil {
		return d
	}
	return it
}

// validateInput checks an item of an input list (NeMoGymResponseInputItem).
func (it Item) validateInput(v *validator, loc []any) {
	it = it.decoded()
	it.validateTokens(v, loc)
	switch it.inferType() {
	case TypeMessage:
		it.validateMessage(v, loc)
	case TypeFunctionCall:
		it.validateFunctionCall(v, loc)
	case TypeFunctionCallOutput:
		it.validateFunctionCallOutput(v, loc)
	case TypeReasoning:
		it.validateReasoning(v, loc)
	default:
		if !otherItemTypes[it.Type] {
			v.add(ErrValue, "Value error, unknown item type "+it.Type, mustRaw(it.Type), at(loc, "type")...)
		}
	}
}

// validateOutput checks an item of a response's output list: the same
// union as an input item, but upstream refuses an item without a type.
func (it Item) validateOutput(v *validator, loc []any) {
	it = it.decoded()
	if it.present&itemType == 0 {
		v.add(ErrValue, "Value error, Responses API output items must include a type discriminator", nil, loc...)
		return
	}
	it.validateInput(v, loc)
}

// inferType is the item's type, or for an item without one the type
// upstream's untagged union settles on: every item model defaults its
// type, so a message needs a role, a function call its arguments, and so
// on.
func (it Item) inferType() string {
	switch {
	case it.present&itemType != 0:
		return it.Type
	case it.Has("role"):
		return TypeMessage
	case it.Has("arguments"):
		return TypeFunctionCall
	case it.Has("call_id") && (it.Has("output") || it.Extra.Has("output")):
		return TypeFunctionCallOutput
	case it.Has("summary"):
		return TypeReasoning
	}
	return TypeMessage
}

// validateTokens checks a training variant's token members: all three
// required ones or none, each a list of numbers.
func (it Item) validateTokens(v *validator, loc []any) {
	var missing []string
	some := false
	for i, k := range tokenFields {
		raw, ok := it.Extra.Get(k)
		if !ok {
			if i < 3 {
				missing = append(missing, k)
			}
			continue
		}
		some = true
		t := typeIntList
		switch k {
		case "generation_log_probs":
			t = typeFloatList
		case "routed_experts":
			if rawKind(raw) == "string" || isNull(raw) {
				continue
			}
			t = typeExpertsValue
		}
		if isNull(raw) || json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
			v.add(ErrList, "Input should be a valid list of numbers", raw, at(loc, k)...)
		}
	}
	if some && len(missing) > 0 {
		slices.Sort(missing)
		v.add(ErrValue, "Value error, Token metadata must include all required fields; missing: "+strings.Join(missing, ", "), nil, loc...)
	}
}

// validateMessage checks a message, which upstream accepts in either of
// two shapes: an input message (a role, and a string or input parts) or
// an output message (an id and output parts, role assistant). When
// neither fits, the errors of the closer one are reported.
func (it Item) validateMessage(v *validator, loc []any) {
	var in, out validator
	it.validateInputMessage(&in, loc)
	if len(in.errs) == 0 {
		return
	}
	it.validateOutputMessage(&out, loc)
	if len(out.errs) == 0 {
		return
	}
	if it.outputShaped() {
		v.errs = append(v.errs, out.errs...)
	} else {
		v.errs = append(v.errs, in.errs...)
	}
}

// outputShaped reports whether a message looks like an output message:
// list content and an id, or output parts.
func (it Item) outputShaped() bool {
	if it.Content == nil || it.Content.Parts == nil {
		return false
	}
	if it.Has("id") {
		return true
	}
	for _, p := range it.Content.Parts {
		if p.Type == "" || slices.Contains(outputPartTypes, p.Type) {
			return true
		}
	}
	return false
}

// validateInputMessage checks the input shape (EasyInputMessage).
func (it Item) validateInputMessage(v *validator, loc []any) {
	switch {
	case !it.Has("role"):
		v.missing(nil, at(loc, "role")...)
	case !slices.Contains(inputRoles, it.Role):
		v.add(ErrLiteral, "Input should be 'user', 'assistant', 'system' or 'developer'", mustRaw(it.Role), at(loc, "role")...)
	}
	if !it.Has("content") {
		v.missing(nil, at(loc, "content")...)
		return
	}
	for j, p := range it.Content.Parts {
		p.validateInput(v, at(loc, "content", j))
	}
}

// validateOutputMessage checks the output shape (ResponseOutputMessage).
func (it Item) validateOutputMessage(v *validator, loc []any) {
	if !it.Has("id") {
		v.missing(nil, at(loc, "id")...)
	}
	if it.Has("role") && it.Role != RoleAssistant {
		v.add(ErrLiteral, "Input should be 'assistant'", mustRaw(it.Role), at(loc, "role")...)
	}
	it.validateStatus(v, loc, false)
	switch {
	case !it.Has("content"):
		v.missing(nil, at(loc, "content")...)
	case it.Content.Parts == nil:
		v.add(ErrList, "Input should be a valid list", mustRaw(it.Content.Text), at(loc, "content")...)
	}
	if it.Content != nil {
		for j, p := range it.Content.Parts {
			p.validateOutput(v, at(loc, "content", j))
		}
	}
}

// validateStatus checks an item status, which may be null when nullable.
func (it Item) validateStatus(v *validator, loc []any, nullable bool) {
	if it.nulls&itemStatus != 0 && !nullable {
		v.add(ErrLiteral, "Input should be 'in_progress', 'completed' or 'incomplete'", json.RawMessage("null"), at(loc, "status")...)
	} else if it.Has("status") && !slices.Contains(itemStatuses, it.Status) {
		v.add(ErrLiteral, "Input should be 'in_progress', 'completed' or 'incomplete'", mustRaw(it.Status), at(loc, "status")...)
	}
}

func (it Item) validateFunctionCall(v *validator, loc []any) {
	for _, k := range []string{"arguments", "call_id", "name"} {
		if !it.Has(k) {
			v.missing(nil, at(loc, k)...)
		}
	}
	it.validateStatus(v, loc, true)
}

func (it Item) validateFunctionCallOutput(v *validator, loc []any) {
	if !it.Has("call_id") {
		v.missing(nil, at(loc, "call_id")...)
	}
	if raw, ok := it.Extra.Get("output"); ok {
		if rawKind(raw) != "array" {
			v.add(ErrString, "Input should be a valid string", raw, at(loc, "output")...)
		}
	} else if !it.Has("output") {
		v.missing(nil, at(loc, "output")...)
	}
	it.validateStatus(v, loc, true)
}

func (it Item) validateReasoning(v *validator, loc []any) {
	if !it.Has("id") {
		v.missing(nil, at(loc, "id")...)
	}
	if !it.Has("summary") {
		v.missing(nil, at(loc, "summary")...)
	}
	for j, p := range it.Summary {
		p.validateTextPart(v, at(loc, "summary", j), PartSummary)
	}
	if it.Content != nil {
		if it.Content.Parts == nil {
			v.add(ErrList, "Input should be a valid list", mustRaw(it.Content.Text), at(loc, "content")...)
		}
		for j, p := range it.Content.Parts {
			p.validateTextPart(v, at(loc, "content", j), PartReasoning)
		}
	}
}

// decoded returns p as upstream would read it (see Item.decoded).
func (p Part) decoded() Part {
	if p.present&decodedBit != 0 {
		return p
	}
	var d Part
	if b, err := json.Marshal(p); err == nil && json.Unmarshal(b, &d) == nil {
		return d
	}
	return p
}

// has reports whether a member arrived with a value.
func (p Part) has(bit uint64) bool { return p.present&bit != 0 }

// validateTextPart checks a part that must be {"type": typ, "text": ...}.
func (p Part) validateTextPart(v *validator, loc []any, typ string) {
	p = p.decoded()
	if !p.has(partType) {
		v.missing(nil, at(loc, "type")...)
	} else if p.Type != typ {
		v.add(ErrLiteral, "Input should be '"+typ+"'", mustRaw(p.Type), at(loc, "type")...)
	}
	if !p.has(partText) {
		v.missing(nil, at(loc, "text")...)
	}
}

// validateInput checks a part of an input message's content.
func (p Part) validateInput(v *validator, loc []any) {
	p = p.decoded()
	if !p.has(partType) {
		v.missing(nil, at(loc, "type")...)
		return
	}
	switch p.Type {
	case PartInputText:
		if !p.has(partText) {
			v.missing(nil, at(loc, "text")...)
		}
	case "input_image":
		var detail string
		if raw, ok := p.Extra.Get("detail"); !ok {
			v.missing(nil, at(loc, "detail")...)
		} else if json.Unmarshal(raw, &detail) != nil || !slices.Contains(imageDetails, detail) {
			v.add(ErrLiteral, "Input should be 'low', 'high' or 'auto'", raw, at(loc, "detail")...)
		}
	case "input_video":
		var sources []string
		for _, k := range []string{"video_url", "video"} {
			if p.Extra.Has(k) {
				sources = append(sources, k)
			}
		}
		if len(sources) != 1 {
			v.add(ErrValue, "Value error, input_video requires exactly one of video_url or video", nil, loc...)
			break
		}
		raw, _ := p.Extra.Get(sources[0])
		var src struct {
			URL *string `json:"url"`
		}
		var url *string
		if json.Unmarshal(raw, &url) != nil && json.Unmarshal(raw, &src) == nil {
			url = src.URL
		}
		if url == nil || strings.TrimSpace(*url) == "" {
			v.add(ErrValue, "Value error, input_video."+sources[0]+" must contain a non-empty URL", raw, at(loc, sources[0])...)
		}
	case "input_file":
	default:
		v.add(ErrLiteral, "Input should be 'input_text', 'input_image', 'input_file' or 'input_video'", mustRaw(p.Type), at(loc, "type")...)
	}
}

// validateOutput checks a part of an output message's content: an
// output_text part (the default type) or a refusal.
func (p Part) validateOutput(v *validator, loc []any) {
	p = p.decoded()
	typ := p.Type
	if !p.has(partType) {
		typ = PartOutputText
		if p.has(partRefusal) {
			typ = PartRefusal
		}
	}
	switch typ {
	case PartOutputText:
		if !p.has(partText) {
			v.missing(nil, at(loc, "text")...)
		}
		switch {
		case p.nulls&partAnnotations != 0:
			v.add(ErrList, "Input should be a valid list", json.RawMessage("null"), at(loc, "annotations")...)
		case !p.has(partAnnotations):
			v.missing(nil, at(loc, "annotations")...)
		}
		for j, a := range p.Annotations {
			var head struct {
				Type *string `json:"type"`
			}
			if json.Unmarshal(a, &head) != nil || head.Type == nil || !slices.Contains(annotationTypes, *head.Type) {
				v.add(ErrValue, "Value error, unknown annotation type", a, at(loc, "annotations", j)...)
			}
		}
	case PartRefusal:
		if !p.has(partRefusal) {
			v.missing(nil, at(loc, "refusal")...)
		}
	default:
		v.add(ErrLiteral, "Input should be 'output_text' or 'refusal'", mustRaw(p.Type), at(loc, "type")...)
	}
}
