package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Item types of the Responses API that the fleet's own servers produce or
// read. Any other type upstream's unions take (hosted tool calls, shell
// and apply_patch calls, compaction, ...) is carried through with its
// members intact, and validated against its model (inputShapes,
// outputShapes).
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
	// raw is the item as it came, for validation.
	raw json.RawMessage
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
	var w itemDecodeWire
	extra, present, nulls, err := decodeObject(b, &w)
	if err != nil {
		return err
	}
	*it = Item{Extra: extra, nulls: nulls, raw: oneLine(bytes.Clone(bytes.TrimSpace(b)))}
	present &^= nulls
	// A declared member of another kind than this struct gives it is
	// kept in Extra as it came: an item type upstream passes through may
	// use the name for something else (a tool search's arguments object).
	for i, m := range []struct {
		src *laxString
		dst *string
	}{{&w.Type, &it.Type}, {&w.ID, &it.ID}, {&w.Role, &it.Role}, {&w.Status, &it.Status}, {&w.CallID, &it.CallID},
		{&w.Name, &it.Name}, {&w.Arguments, &it.Arguments}, {&w.Output, &it.Output}} {
		bit := uint64(1) << []int{0, 1, 2, 3, 5, 6, 7, 8}[i]
		if present&bit == 0 {
			continue
		}
		if m.src.other != nil {
			present &^= bit
			it.Extra = append(it.Extra, Field{Key: itemMembers[i], Value: m.src.other})
			continue
		}
		*m.dst = m.src.s
	}
	if present&itemContent != 0 {
		raw := bytes.TrimSpace(w.Content)
		var c Content
		if (raw[0] == '"' || raw[0] == '[') && c.decodeRaw(raw) == nil {
			it.Content = &c
		} else {
			// Not a content this struct can hold (a part that is not an
			// object, ...): validation reports it where upstream does.
			present &^= itemContent
			it.Extra = append(it.Extra, Field{Key: "content", Value: oneLine(bytes.Clone(raw))})
		}
	}
	if present&itemSummary != 0 {
		raw := bytes.TrimSpace(w.Summary)
		if raw[0] != '[' || decodeValue(raw, reflect.ValueOf(&it.Summary).Elem()) != nil {
			it.Summary = nil
			present &^= itemSummary
			it.Extra = append(it.Extra, Field{Key: "summary", Value: oneLine(bytes.Clone(raw))})
		}
	}
	it.present = present | decodedBit
	return nil
}

// itemDecodeWire is itemWire as it is decoded: the same members in the
// same order, each read leniently.
type itemDecodeWire struct {
	Type      laxString       `json:"type,omitempty"`
	ID        laxString       `json:"id,omitempty"`
	Role      laxString       `json:"role,omitempty"`
	Status    laxString       `json:"status,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	CallID    laxString       `json:"call_id,omitempty"`
	Name      laxString       `json:"name,omitempty"`
	Arguments laxString       `json:"arguments,omitempty"`
	Output    laxString       `json:"output,omitempty"`
	Summary   json.RawMessage `json:"summary,omitempty"`
}

// itemMembers names the string members decodeRaw reads leniently, in
// its order.
var itemMembers = [...]string{"type", "id", "role", "status", "call_id", "name", "arguments", "output"}

// itemBit returns the bit of a member itemWire declares.
func itemBit(member string) (uint64, bool) {
	switch member {
	case "type":
		return itemType, true
	case "id":
		return itemID, true
	case "role":
		return itemRole, true
	case "status":
		return itemStatus, true
	case "content":
		return itemContent, true
	case "call_id":
		return itemCallID, true
	case "name":
		return itemName, true
	case "arguments":
		return itemArguments, true
	case "output":
		return itemOutput, true
	case "summary":
		return itemSummary, true
	}
	return 0, false
}

// laxString is a member that is a string, or else any other value, kept
// as it came (other); null leaves both empty.
type laxString struct {
	s     string
	other json.RawMessage
}

func (l *laxString) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		s, err := decodeString(b)
		l.s = s
		return err
	case !isNull(b):
		l.other = oneLine(bytes.Clone(b))
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

// Has reports whether the named member arrived, with a value other than
// null, when the item was decoded: "type", "id", "role", "status",
// "content", "call_id", "name", "arguments", "output" (a string output)
// or "summary".
func (it Item) Has(member string) bool {
	bit, ok := itemBit(member)
	return ok && it.present&bit != 0
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

// Members a training variant of an item carries; when any is present the
// first three must all be.
var tokenFields = []string{"prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts"}

var (
	itemStatuses    = []string{StatusInProgress, StatusCompleted, StatusIncomplete}
	messageRoles    = []string{RoleUser, RoleAssistant, RoleSystem, RoleDeveloper}
	simpleRoles     = []string{RoleUser, RoleSystem, RoleDeveloper}
	outputPartTypes = []string{PartOutputText, PartRefusal}
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

// in reports whether the member key arrived at all (null, or a value of
// any kind, included), as Python's `key in value` does.
func (it *Item) in(key string) bool {
	if bit, ok := itemBit(key); ok && (it.present|it.nulls)&bit != 0 {
		return true
	}
	return it.Extra.Has(key)
}

// firstPartType is the type of the first content part as upstream's
// discriminator reads it: its type, else "refusal" for a part with a
// refusal member, else "".
func (it *Item) firstPartType() string {
	if it.Content == nil {
		// A list this struct could not hold: read its first element.
		raw, _ := it.Extra.Get("content")
		var parts []json.RawMessage
		if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
			return ""
		}
		var first map[string]json.RawMessage
		if json.Unmarshal(parts[0], &first) != nil {
			return ""
		}
		var typ string
		if json.Unmarshal(first["type"], &typ) == nil && typ != "" {
			return typ
		}
		if _, ok := first["refusal"]; ok {
			return PartRefusal
		}
		return ""
	}
	if len(it.Content.Parts) == 0 {
		return ""
	}
	p := &it.Content.Parts[0]
	if p.Type != "" {
		return p.Type
	}
	if (p.present|p.nulls)&partRefusal != 0 || p.Extra.Has("refusal") {
		return PartRefusal
	}
	return ""
}

// listContent reports whether the content is a list (one whose parts
// this struct cannot hold included).
func (it *Item) listContent() bool {
	if it.Content != nil {
		return it.Content.Parts != nil
	}
	raw, ok := it.Extra.Get("content")
	return ok && len(raw) > 0 && raw[0] == '['
}

// hasContent reports whether the content is a string or a list.
func (it *Item) hasContent() bool { return it.Content != nil || it.listContent() }

// messageTag chooses among upstream's three message models by role,
// content and status.
func (it *Item) messageTag() string {
	if it.Has("role") && slices.Contains(simpleRoles, it.Role) {
		if it.listContent() && it.Has("status") && slices.Contains(itemStatuses, it.Status) {
			return tagInputMessage
		}
		return tagEasyMessage
	}
	if it.listContent() {
		if it.Content == nil || len(it.Content.Parts) > 0 {
			if slices.Contains(outputPartTypes, it.firstPartType()) {
				return tagOutputMessage
			}
		} else if it.Has("id") {
			return tagOutputMessage
		}
	}
	return tagEasyMessage
}

// untypedTag infers the model of an input item without a type, falling
// back, as upstream does, to the permissive mcp_list_tools model.
func (it *Item) untypedTag() string {
	if it.Has("role") && slices.Contains(messageRoles, it.Role) && it.hasContent() {
		tag := it.messageTag()
		if tag == tagOutputMessage {
			if it.Has("id") {
				return tag
			}
		} else if !slices.Contains(outputPartTypes, it.firstPartType()) {
			return tag
		}
		return "mcp_list_tools"
	}
	if !it.in("role") && it.Has("id") && it.listContent() &&
		(it.Content != nil && len(it.Content.Parts) == 0 || slices.Contains(outputPartTypes, it.firstPartType())) {
		return tagOutputMessage
	}
	if it.in("arguments") && it.in("name") {
		if it.in("call_id") {
			return TypeFunctionCall
		}
		return "mcp_call"
	}
	if it.Has("call_id") && it.in("output") {
		return TypeFunctionCallOutput
	}
	if it.Has("id") && it.Summary != nil {
		return TypeReasoning
	}
	return "mcp_list_tools"
}

// trainingTag routes to a training variant when the item carries all
// three required token members.
func (it *Item) trainingTag(tag string) string {
	switch tag {
	case tagEasyMessage, tagInputMessage, tagOutputMessage, TypeFunctionCall, TypeReasoning:
		for _, k := range tokenFields[:3] {
			if !it.Extra.Has(k) {
				return tag
			}
		}
		return tag + tagTraining
	}
	return tag
}

// Tags of upstream's item unions besides the item types themselves.
const (
	tagEasyMessage   = "easy_message"
	tagInputMessage  = "input_message"
	tagOutputMessage = "output_message"
	tagFCOInput      = "function_call_output_input"
	tagTraining      = "__training"
)

// unhashable reports whether upstream's discriminator fails on the item
// (a role, or a status it looks at, that is a list or an object cannot be
// looked up in a set): upstream answers 500 there, protocol 422.
func (it *Item) unhashable() bool {
	bad := func(key string) bool {
		raw, ok := it.Extra.Get(key)
		return ok && len(raw) > 0 && (raw[0] == '[' || raw[0] == '{')
	}
	if bad("role") {
		return true
	}
	return it.Has("role") && slices.Contains(simpleRoles, it.Role) && it.listContent() && bad("status")
}

// validateInput checks an item of an input list
// (NeMoGymResponseInputItem): upstream's discriminator picks one model,
// whose rules then apply.
func (it Item) validateInput(v *validator, loc []any) {
	it = it.decoded()
	if !it.validateTokens(v, loc) {
		return
	}
	if (it.Type == TypeMessage || !it.in("type") || it.nulls&itemType != 0) && it.unhashable() {
		v.add(ErrValue, "Value error, the item's role or status cannot be read", nil, loc...)
		return
	}
	var tag string
	switch {
	case it.Type == TypeMessage && it.present&itemType != 0:
		tag = it.messageTag()
	case it.present&itemType != 0:
		tag = it.Type
	case it.Extra.Has("type"):
		// A type that is not a string (null reads as no type).
		v.add("union_tag_not_found", "Unable to extract tag using discriminator", nil, loc...)
		return
	default:
		tag = it.untypedTag()
	}
	it.validateTag(v, loc, it.trainingTag(tag), inputShapes)
}

// validateOutput checks an item of a response's output list
// (NeMoGymResponseOutputItem): an item needs a type member, and the
// output discriminator picks its model.
func (it Item) validateOutput(v *validator, loc []any) {
	it = it.decoded()
	if !it.in("type") {
		v.add(ErrValue, "Value error, Responses API output items must include a type discriminator", nil, loc...)
		return
	}
	if !it.validateTokens(v, loc) {
		return
	}
	var tag string
	switch {
	case it.present&itemType == 0:
		v.add("union_tag_not_found", "Unable to extract tag using discriminator", nil, loc...)
		return
	case it.Type == TypeMessage:
		if it.unhashable() {
			v.add(ErrValue, "Value error, the item's role or status cannot be read", nil, loc...)
			return
		}
		tag = it.messageTag()
	case it.Type == TypeFunctionCallOutput:
		tag = tagFCOInput
		if it.Has("id") && it.Has("status") && slices.Contains(itemStatuses, it.Status) {
			tag = TypeFunctionCallOutput
		}
	default:
		tag = it.Type
	}
	it.validateTag(v, loc, it.trainingTag(tag), outputShapes)
}

// validateTag checks the item against the model of tag in shapes.
func (it *Item) validateTag(v *validator, loc []any, tag string, shapes map[string]*shape) {
	s, ok := shapes[tag]
	if !ok {
		v.add("union_tag_invalid", "Input tag '"+tag+"' found using the item discriminator does not match any of the expected tags",
			mustRaw(it.Type), loc...)
		return
	}
	raw := it.raw
	if raw == nil {
		b, err := it.appendJSON(nil)
		if err != nil {
			return
		}
		raw = b
	}
	s.check(v, raw, loc)
}

// validateTokens applies upstream's check of a training variant's token
// members before the union: if any is present, the three required ones
// must all be, and each must have its type. It reports whether the item
// passed.
func (it Item) validateTokens(v *validator, loc []any) bool {
	if !slices.ContainsFunc(tokenFields, it.Extra.Has) {
		return true
	}
	var missing []string
	for _, k := range tokenFields[:3] {
		if !it.Extra.Has(k) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		v.add(ErrValue, "Value error, Token metadata must include all required fields; missing: "+strings.Join(missing, ", "), nil, loc...)
		return false
	}
	n := len(v.errs)
	for _, f := range tokenShape.fields {
		if raw, ok := it.Extra.Get(f.key); ok {
			f.s.check(v, raw, at(loc, f.key))
		}
	}
	return len(v.errs) == n
}

// inputVideoCheck is upstream's check of an input_video part, made before
// the part union: exactly one source, holding a non-empty URL.
func inputVideoCheck(raw []byte) string {
	var part map[string]json.RawMessage
	if json.Unmarshal(raw, &part) != nil || string(part["type"]) != `"input_video"` {
		return ""
	}
	var sources []string
	for _, k := range []string{"video_url", "video"} {
		if _, ok := part[k]; ok {
			sources = append(sources, k)
		}
	}
	if len(sources) != 1 {
		return "Value error, input_video requires exactly one of video_url or video"
	}
	src := part[sources[0]]
	var url *string
	if json.Unmarshal(src, &url) != nil {
		var obj map[string]json.RawMessage
		if json.Unmarshal(src, &obj) == nil {
			_ = json.Unmarshal(obj["url"], &url)
		}
	}
	if url == nil || strings.TrimSpace(*url) == "" {
		return "Value error, input_video." + sources[0] + " must contain a non-empty URL"
	}
	return ""
}

// Shapes of upstream's item models (openai 2.44 types as NeMo Gym wraps
// them). Item models accept members they do not declare.
var (
	inputTextPart  = object(false, "text!", strShape, "type!", lit(PartInputText))
	inputImagePart = object(false, "detail!", lit("low", "high", "auto", "original"), "type!", lit("input_image"),
		"file_id", optStr, "image_url", optStr)
	inputFilePart = object(false, "type!", lit("input_file"), "detail", lit("low", "high"), "file_data", strShape,
		"file_id", optStr, "file_url", strShape, "filename", strShape)
	inputVideoPart = object(false, "type!", lit("input_video"), "video_url", strOrObjAny, "video", strOrObjAny)
	inputPart      = &shape{kind: shapeUnion, branches: []*shape{inputTextPart, inputImagePart, inputFilePart, inputVideoPart},
		pre: preMessage(inputVideoCheck)}
	inputParts = listOf(inputPart)

	annotationShape = union(
		object(false, "file_id!", strShape, "filename!", strShape, "index!", intShape, "type!", lit("file_citation")),
		object(false, "end_index!", intShape, "start_index!", intShape, "title!", strShape, "type!", lit("url_citation"), "url!", strShape),
		object(false, "container_id!", strShape, "end_index!", intShape, "file_id!", strShape, "filename!", strShape,
			"start_index!", intShape, "type!", lit("container_file_citation")),
		object(false, "file_id!", strShape, "index!", intShape, "type!", lit("file_path")))
	// logprobShape is response_output_text_param.py's Logprob; its
	// Iterable members are only checked to be iterable.
	logprobShape = object(false, "token!", strShape, "bytes!", iterableShape, "logprob!", floatShape, "top_logprobs!", iterableShape)
	outputPart   = union(
		object(false, "annotations!", listOf(annotationShape), "text!", strShape, "type", lit(PartOutputText), "logprobs", nullable(listOf(logprobShape))),
		object(false, "refusal!", strShape, "type", lit(PartRefusal)))

	tokenShape = object(false, "prompt_token_ids!", listOf(intShape), "generation_token_ids!", listOf(intShape),
		"generation_log_probs!", listOf(floatShape), "routed_experts", nullable(union(strShape, listOf(listOf(listOf(intShape))))))

	easyMessage = object(false, "content!", union(strShape, inputParts),
		"role!", lit(RoleUser, RoleAssistant, RoleSystem, RoleDeveloper), "type", lit(TypeMessage), "phase", phaseShape)
	inputMessage = object(false, "content!", inputParts, "role!", lit(RoleUser, RoleSystem, RoleDeveloper),
		"status", statusShape, "type", lit(TypeMessage))
	outputMessage = object(false, "id!", strShape, "content!", listOf(outputPart), "role", lit(RoleAssistant),
		"status", statusShape, "type", lit(TypeMessage), "phase", phaseShape)
	functionCall = object(false, "arguments!", strShape, "call_id!", strShape, "name!", strShape, "type", lit(TypeFunctionCall),
		"id", optStr, "status", optStatus, "namespace", optStr)
	functionCallOutput = object(false, "call_id!", strShape, "output!", union(strShape, listOf(fcoContent)), "type", lit(TypeFunctionCallOutput),
		"id", optStr, "status", optStatus)
	reasoningItem = object(false, "id!", strShape,
		"summary!", listOf(object(false, "text!", strShape, "type!", lit(PartSummary))), "type", lit(TypeReasoning),
		"encrypted_content", optStr, "content", nullable(listOf(object(false, "text!", strShape, "type!", lit(PartReasoning)))))
)

// withTokens returns s with the training variant's token members.
func withTokens(s *shape) *shape {
	c := *s
	c.fields = append(slices.Clone(tokenShape.fields), s.fields...)
	return &c
}

// Nested models of the pass-through items (openai 2.44's
// openai/types/responses/*.py). Their unions carry the discriminator only
// as openai's own metadata, so pydantic tries each member in turn: the
// union rule of shape.walkUnion.
var (
	optKeys     = nullable(listOfStr)
	safetyCheck = object(false, "id!", strShape, "code", optStr, "message", optStr)
	// computerAction is ComputerAction (computer_action.py), the same
	// members as response_computer_tool_call.py's Action.
	computerAction = union(
		object(false, "button!", lit("left", "right", "wheel", "back", "forward"), "type!", lit("click"), "x!", intShape, "y!", intShape,
			"keys", optKeys),
		object(false, "keys", optKeys, "type!", lit("double_click"), "x!", intShape, "y!", intShape),
		object(false, "path!", listOf(object(false, "x!", intShape, "y!", intShape)), "type!", lit("drag"), "keys", optKeys),
		object(false, "keys!", listOfStr, "type!", lit("keypress")),
		object(false, "type!", lit("move"), "x!", intShape, "y!", intShape, "keys", optKeys),
		object(false, "type!", lit("screenshot")),
		object(false, "scroll_x!", intShape, "scroll_y!", intShape, "type!", lit("scroll"), "x!", intShape, "y!", intShape, "keys", optKeys),
		object(false, "text!", strShape, "type!", lit("type")),
		object(false, "type!", lit("wait")))
	// webSearchAction is response_function_web_search.py's Action.
	webSearchAction = union(
		object(false, "type!", lit("search"), "queries", nullable(listOfStr), "query", optStr,
			"sources", nullable(listOf(object(false, "type!", lit("url"), "url!", strShape)))),
		object(false, "type!", lit("open_page"), "url", optStr),
		object(false, "pattern!", strShape, "type!", lit("find_in_page"), "url!", strShape))
	// patchOperation is response_apply_patch_tool_call.py's Operation.
	patchOperation = union(
		object(false, "diff!", strShape, "path!", strShape, "type!", lit("create_file")),
		object(false, "path!", strShape, "type!", lit("delete_file")),
		object(false, "diff!", strShape, "path!", strShape, "type!", lit("update_file")))
	shellAction      = object(false, "commands!", listOfStr, "max_output_length", optInt, "timeout_ms", optInt)
	shellEnvironment = nullable(union(object(false, "type!", lit("local")),
		object(false, "container_id!", strShape, "type!", lit("container_reference"))))
	shellOutput = object(false, "outcome!", union(object(false, "type!", lit("timeout")),
		object(false, "exit_code!", intShape, "type!", lit("exit"))), "stderr!", strShape, "stdout!", strShape, "created_by", optStr)
	localShellAction = object(false, "command!", listOfStr, "env!", strMapShape, "type!", lit("exec"), "timeout_ms", optInt,
		"user", optStr, "working_directory", optStr)
	fileSearchResult = object(false, "attributes", nullable(&shape{kind: shapeDict, elem: union(strShape, floatShape, boolShape)}),
		"file_id", optStr, "filename", optStr, "score", optFloat, "text", optStr)
	codeOutput = union(object(false, "logs!", strShape, "type!", lit("logs")), object(false, "type!", lit("image"), "url!", strShape))
	// inputFileModel is the ResponseInputFile model (the parameter form,
	// inputFilePart, takes no nulls).
	inputFileModel = object(false, "type!", lit("input_file"), "detail", optLit("low", "high"), "file_data", optStr, "file_id", optStr,
		"file_url", optStr, "filename", optStr)
	inputContentModels = union(inputTextPart, inputImagePart, inputFileModel)
)

// passThroughShapes are the item models both unions share, checked
// member by member, nested models included (an mcp_list_tools item's
// tools are List[Any] in nemo-gym, openai_utils.py:352).
var passThroughShapes = map[string]*shape{
	"mcp_call": object(false, "id", optStr, "arguments!", strShape, "name!", strShape, "server_label", optStr, "type", lit("mcp_call"),
		"approval_request_id", optStr, "error", optStr, "output", optStr, "status", optStr),
	"mcp_list_tools":       object(false, "id", optStr, "server_label", optStr, "tools", listAny, "type", lit("mcp_list_tools"), "error", optStr),
	"mcp_approval_request": object(false, "id", optStr, "arguments!", strShape, "name!", strShape, "server_label", optStr, "type", lit("mcp_approval_request")),
	"file_search_call": object(false, "id!", strShape, "queries!", listOfStr,
		"status!", lit("in_progress", "searching", "completed", "incomplete", "failed"), "type!", lit("file_search_call"), "results", nullable(listOf(fileSearchResult))),
	"web_search_call": object(false, "id!", strShape, "action!", webSearchAction, "status!", lit("in_progress", "searching", "completed", "failed"),
		"type!", lit("web_search_call")),
	"computer_call": object(false, "id!", strShape, "call_id!", strShape, "pending_safety_checks!", listOf(safetyCheck),
		"status!", lit("in_progress", "completed", "incomplete"), "type!", lit("computer_call"), "action", nullable(computerAction), "actions", nullable(listOf(computerAction))),
	"image_generation_call": object(false, "id!", strShape, "result", optStr, "status!", lit("in_progress", "completed", "generating", "failed"),
		"type!", lit("image_generation_call")),
	"code_interpreter_call": object(false, "id!", strShape, "code", optStr, "container_id!", strShape, "outputs", nullable(listOf(codeOutput)),
		"status!", lit("in_progress", "completed", "incomplete", "interpreting", "failed"), "type!", lit("code_interpreter_call")),
	"local_shell_call": object(false, "id!", strShape, "action!", localShellAction, "call_id!", strShape, "status!", lit("in_progress", "completed", "incomplete"),
		"type!", lit("local_shell_call")),
	"custom_tool_call": object(false, "call_id!", strShape, "input!", strShape, "name!", strShape, "type!", lit("custom_tool_call"),
		"id", optStr, "namespace", optStr),
	"apply_patch_call": object(false, "id!", strShape, "call_id!", strShape, "operation!", patchOperation, "status!", lit("in_progress", "completed"),
		"type!", lit("apply_patch_call"), "created_by", optStr),
	"apply_patch_call_output": object(false, "id!", strShape, "call_id!", strShape, "status!", lit("completed", "failed"),
		"type!", lit("apply_patch_call_output"), "created_by", optStr, "output", optStr),
	"compaction": object(false, "id!", strShape, "encrypted_content!", strShape, "type!", lit("compaction"), "created_by", optStr),
	"shell_call": object(false, "id!", strShape, "action!", shellAction, "call_id!", strShape, "environment", shellEnvironment,
		"status!", lit("in_progress", "completed", "incomplete"), "type!", lit("shell_call"), "created_by", optStr),
	"shell_call_output": object(false, "id!", strShape, "call_id!", strShape, "max_output_length", optInt, "output!", listOf(shellOutput),
		"status!", lit("in_progress", "completed", "incomplete"), "type!", lit("shell_call_output"), "created_by", optStr),
	"tool_search_call": object(false, "id!", strShape, "arguments!", anyShape, "call_id", optStr, "execution!", lit("server", "client"),
		"status!", lit("in_progress", "completed", "incomplete"), "type!", lit("tool_search_call"), "created_by", optStr),
	"tool_search_output": object(false, "id!", strShape, "call_id", optStr, "execution!", lit("server", "client"),
		"status!", lit("in_progress", "completed", "incomplete"), "tools!", listOf(responseTools), "type!", lit("tool_search_output"), "created_by", optStr),
}

// inputShapes are the models of NeMoGymResponseInputItem, by tag.
var inputShapes = mergeShapes(passThroughShapes, map[string]*shape{
	tagEasyMessage: easyMessage, tagInputMessage: inputMessage, tagOutputMessage: outputMessage,
	TypeFunctionCall: functionCall, TypeFunctionCallOutput: functionCallOutput, TypeReasoning: reasoningItem,
	"computer_call_output": object(false, "call_id!", strShape, "output!", screenshotShape, "type!", lit("computer_call_output"), "id", optStr,
		"acknowledged_safety_checks", nullable(listOf(safetyCheck)), "status", &shape{kind: shapeLiteral, nullable: true,
			lits: []string{StatusInProgress, StatusCompleted, StatusIncomplete}, pre: preMessage(failedStatus)}),
	"custom_tool_call_output": object(false, "call_id!", strShape, "output!", union(strShape, listOf(inputContentModels)), "type!", lit("custom_tool_call_output"), "id", optStr),
	"local_shell_call_output": object(false, "id!", strShape, "output!", strShape, "type!", lit("local_shell_call_output"), "status", optStatus),
	"mcp_approval_response": object(false, "approval_request_id!", strShape, "approve!", boolShape, "type!", lit("mcp_approval_response"),
		"id", optStr, "reason", optStr),
	"compaction_trigger": object(false, "type!", lit("compaction_trigger")),
	// Upstream sets an input additional_tools item's role to developer
	// before validating it.
	"additional_tools": object(false, "tools!", listOf(responseTools), "type!", lit("additional_tools"), "id", optStr),
})

// outputShapes are the models of NeMoGymResponseOutputItem, by tag.
var outputShapes = mergeShapes(passThroughShapes, map[string]*shape{
	tagOutputMessage: outputMessage, TypeFunctionCall: functionCall, TypeReasoning: reasoningItem,
	tagEasyMessage: easyMessage, tagInputMessage: inputMessage, tagFCOInput: functionCallOutput,
	// A function_call_output of a response is ResponseFunctionToolCallOutputItem,
	// whose list-form parts are the input content models.
	TypeFunctionCallOutput: object(false, "id!", strShape, "call_id!", strShape, "output!", union(strShape, listOf(inputContentModels)), "status!", statusShape,
		"type!", lit(TypeFunctionCallOutput), "created_by", optStr),
	"computer_call_output": object(false, "id!", strShape, "call_id!", strShape, "output!", screenshotShape,
		"status!", lit("completed", "incomplete", "failed", "in_progress"), "type!", lit("computer_call_output"),
		"acknowledged_safety_checks", nullable(listOf(safetyCheck)), "created_by", optStr),
	"custom_tool_call_output": object(false, "call_id!", strShape, "output!", union(strShape, listOf(inputContentModels)), "type!", lit("custom_tool_call_output"),
		"id!", strShape, "status!", statusShape, "created_by", optStr),
	"local_shell_call_output": object(false, "id!", strShape, "output!", strShape, "type!", lit("local_shell_call_output"), "status", optStatus),
	"mcp_approval_response": object(false, "id!", strShape, "approval_request_id!", strShape, "approve!", boolShape,
		"type!", lit("mcp_approval_response"), "reason", optStr),
	"additional_tools": object(false, "id!", strShape,
		"role!", lit("unknown", "user", "assistant", "system", "critic", "discriminator", "developer", "tool"),
		"tools!", listOf(responseTools), "type!", lit("additional_tools")),
})

// fcoContent is a part of an input function call output in the list
// form (ResponseFunctionCallOutputItemParam: the input text, image and
// file content TypedDicts of openai 2.44).
var fcoContent = union(object(false, "text!", strShape, "type!", lit(PartInputText)),
	object(false, "type!", lit("input_image"), "detail", optLit("low", "high", "auto", "original"), "file_id", optStr,
		"image_url", optStr),
	object(false, "type!", lit("input_file"), "detail", lit("low", "high"), "file_data", optStr, "file_id", optStr,
		"file_url", optStr, "filename", optStr))

// screenshotShape is a computer call's output.
var screenshotShape = object(false, "type!", lit("computer_screenshot"), "file_id", optStr, "image_url", optStr)

// failedStatus is upstream's replay rule for an input computer_call_output:
// a "failed" status is dropped before validation.
func failedStatus(raw []byte) string {
	if string(raw) == `"failed"` {
		return skipCheck
	}
	return ""
}

// mergeShapes returns base plus more, with the training variants of the
// trainable models.
func mergeShapes(base, more map[string]*shape) map[string]*shape {
	out := make(map[string]*shape, len(base)+2*len(more))
	for k, s := range base {
		out[k] = s
	}
	for k, s := range more {
		out[k] = s
		switch k {
		case tagEasyMessage, tagInputMessage, tagOutputMessage, TypeFunctionCall, TypeReasoning:
			out[k+tagTraining] = withTokens(s)
		}
	}
	return out
}
