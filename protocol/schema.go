package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// shapeKind is what a shape accepts.
type shapeKind uint8

const (
	shapeAny     shapeKind = iota // any value
	shapeString                   // a string
	shapeInt                      // an integer, with pydantic's lax coercions
	shapeFloat                    // a number, with pydantic's lax coercions
	shapeBool                     // a boolean, with pydantic's lax coercions
	shapeLiteral                  // one of lits (strings)
	shapeList                     // a list of elem
	shapeDict                     // an object whose every value is elem
	shapeObject                   // an object with fields
	shapeUnion                    // any one of branches
)

// shape is a small schema for the members this package carries as raw
// JSON: the OpenAI parameter objects nested in a request, and the item
// types the fleet's servers pass through. It applies the rules pydantic
// applies to the same declarations, in python (lax) mode, which is how
// FastAPI validates a JSON body.
type shape struct {
	kind     shapeKind
	nullable bool
	lits     []string
	elem     *shape
	fields   []shapeField
	forbid   bool // an object refuses members it does not declare
	branches []*shape
	// pre, when set, runs first, as a pydantic before-validator: it
	// returns nil to go on, or the errors it found, with locations
	// relative to the value, and the check stops there (an empty
	// non-nil list accepts the value as it is).
	pre func(raw []byte) []FieldError
}

// skipCheck is what a preMessage function returns to accept a value
// unchecked.
const skipCheck = "\x00skip"

// preMessage makes a shape's pre of a before-validator that finds one
// error at most: f returns "" to go on, skipCheck to accept the value
// as it is, or the message of an error at the value's location (a value
// error when it says so, else a literal error).
func preMessage(f func(raw []byte) string) func([]byte) []FieldError {
	return func(raw []byte) []FieldError {
		switch msg := f(raw); msg {
		case "":
			return nil
		case skipCheck:
			return []FieldError{}
		default:
			kind := ErrValue
			if !strings.HasPrefix(msg, "Value error") {
				kind = ErrLiteral
			}
			return []FieldError{{Type: kind, Msg: msg, Input: json.RawMessage(raw)}}
		}
	}
}

// shapeField is one declared member of an object shape.
type shapeField struct {
	key      string
	keyAny   any // key, boxed once for locations
	required bool
	s        *shape
}

// Shape constructors, to keep the tables below short.
var (
	anyShape    = &shape{kind: shapeAny}
	strShape    = &shape{kind: shapeString}
	optStr      = &shape{kind: shapeString, nullable: true}
	intShape    = &shape{kind: shapeInt}
	optInt      = &shape{kind: shapeInt, nullable: true}
	floatShape  = &shape{kind: shapeFloat}
	optFloat    = &shape{kind: shapeFloat, nullable: true}
	boolShape   = &shape{kind: shapeBool}
	optBool     = &shape{kind: shapeBool, nullable: true}
	objAny      = &shape{kind: shapeDict, elem: anyShape}
	optObjAny   = &shape{kind: shapeDict, elem: anyShape, nullable: true}
	listAny     = &shape{kind: shapeList, elem: anyShape}
	strMapShape = &shape{kind: shapeDict, elem: strShape}
	listOfStr   = &shape{kind: shapeList, elem: strShape}
	statusShape = lit(StatusInProgress, StatusCompleted, StatusIncomplete)
	optStatus   = optLit(StatusInProgress, StatusCompleted, StatusIncomplete)
	phaseShape  = optLit("commentary", "final_answer")
	strOrObjAny = union(strShape, objAny)
)

func lit(values ...string) *shape    { return &shape{kind: shapeLiteral, lits: values} }
func optLit(values ...string) *shape { return &shape{kind: shapeLiteral, lits: values, nullable: true} }
func listOf(elem *shape) *shape      { return &shape{kind: shapeList, elem: elem} }
func union(b ...*shape) *shape       { return &shape{kind: shapeUnion, branches: b} }

// nullable returns a copy of s that also accepts null.
func nullable(s *shape) *shape {
	c := *s
	c.nullable = true
	return &c
}

// object returns an object shape; fields are "key" (optional) or "key!"
// (required), each followed by its shape.
func object(forbid bool, spec ...any) *shape {
	s := &shape{kind: shapeObject, forbid: forbid}
	for i := 0; i+1 < len(spec); i += 2 {
		key := spec[i].(string)
		req := strings.HasSuffix(key, "!")
		name := strings.TrimSuffix(key, "!")
		s.fields = append(s.fields, shapeField{key: name, keyAny: name, required: req, s: spec[i+1].(*shape)})
	}
	return s
}

// field returns the declared member key of an object shape, or nil.
func (s *shape) field(key string) *shapeField {
	for i := range s.fields {
		if s.fields[i].key == key {
			return &s.fields[i]
		}
	}
	return nil
}

// kindError gives pydantic's error for a value a scalar or container
// shape refuses.
func (s *shape) kindError() (string, string) {
	switch s.kind {
	case shapeString:
		return ErrString, "Input should be a valid string"
	case shapeInt:
		return ErrInt, "Input should be a valid integer"
	case shapeFloat:
		return ErrFloat, "Input should be a valid number"
	case shapeBool:
		return ErrBool, "Input should be a valid boolean"
	case shapeLiteral:
		return ErrLiteral, literalMessage(s.lits)
	case shapeList:
		return ErrList, "Input should be a valid list"
	case shapeDict:
		return ErrDict, "Input should be a valid dictionary"
	}
	return ErrModelType, "Input should be a valid dictionary or object to extract fields from"
}

// literalMessage is pydantic's message for a value outside a literal.
func literalMessage(lits []string) string {
	quoted := make([]string, len(lits))
	for i, a := range lits {
		quoted[i] = "'" + a + "'"
	}
	if len(quoted) == 1 {
		return "Input should be " + quoted[0]
	}
	return "Input should be " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// check appends to v the errors pydantic reports for raw (valid JSON)
// against s, under loc.
func (s *shape) check(v *validator, raw []byte, loc []any) {
	var buf [16]any
	s.walk(v, raw, append(buf[:0], loc...))
}

// fail adds an error at a copy of loc (walk reuses loc's array).
func (v *validator) fail(kind, msg string, input json.RawMessage, loc []any) {
	v.add(kind, msg, input, slices.Clone(loc)...)
}

// walk is check on a location whose array the walk may extend in place:
// a member's or element's location is loc plus its key or index, and an
// error keeps a copy.
func (s *shape) walk(v *validator, raw []byte, loc []any) {
	raw = bytes.TrimSpace(raw)
	if s.pre != nil {
		if errs := s.pre(raw); errs != nil {
			for _, e := range errs {
				v.add(e.Type, e.Msg, e.Input, append(slices.Clone(loc), e.Loc...)...)
			}
			return
		}
	}
	if isNull(raw) {
		if !s.nullable && s.kind != shapeAny {
			kind, msg := s.kindError()
			if s.kind == shapeUnion {
				kind, msg = ErrValue, "Input should be one of the union's members"
			}
			v.fail(kind, msg, json.RawMessage("null"), loc)
		}
		return
	}
	ok := true
	switch s.kind {
	case shapeAny:
	case shapeString:
		ok = raw[0] == '"'
	case shapeInt:
		ok = acceptsInt(raw)
	case shapeFloat:
		ok = acceptsFloat(raw)
	case shapeBool:
		ok = acceptsBool(raw)
	case shapeLiteral:
		ok = s.literalHas(raw)
	case shapeList:
		if ok = raw[0] == '['; ok && s.elem.kind != shapeAny {
			_ = scanArray(raw, func(i int, e []byte) error {
				s.elem.walk(v, e, append(loc, i))
				return nil
			})
		}
	case shapeDict:
		if ok = raw[0] == '{'; ok && s.elem.kind != shapeAny {
			_ = scanObject(raw, typeObject, func(key string, e []byte) error {
				s.elem.walk(v, e, append(loc, key))
				return nil
			})
		}
	case shapeObject:
		if ok = raw[0] == '{'; ok {
			s.walkObject(v, raw, loc)
		}
	case shapeUnion:
		s.walkUnion(v, raw, loc)
	}
	if !ok {
		kind, msg := s.kindError()
		v.fail(kind, msg, json.RawMessage(raw), loc)
	}
}

// literalHas reports whether the JSON string raw is one of s's values.
func (s *shape) literalHas(raw []byte) bool {
	if raw[0] != '"' {
		return false
	}
	for _, l := range s.lits {
		if keyIs(raw, l) {
			return true
		}
	}
	return false
}

// scanMembers calls fn with the raw key (a JSON string) and the raw
// value of each member of the object b (valid JSON), decoding nothing.
func scanMembers(b []byte, fn func(key, value []byte)) {
	i := skipSpace(b, 0) + 1 // past '{'
	for i = skipSpace(b, i); i < len(b) && b[i] != '}'; i = skipSpace(b, i) {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := valueEnd(b, i)
		key := b[i:end]
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // past ':'
		end = valueEnd(b, i)
		fn(key, b[i:end])
		i = end
	}
}

// walkObject checks an object's declared members (a repeated member
// counts by its last value, as Python's json module reads it).
func (s *shape) walkObject(v *validator, raw []byte, loc []any) {
	var seen uint64
	var buf [24][]byte
	values := buf[:0]
	if len(s.fields) > len(buf) {
		values = make([][]byte, len(s.fields))
	} else {
		values = buf[:len(s.fields)]
	}
	var extra []string
	scanMembers(raw, func(key, e []byte) {
		for i := range s.fields {
			if keyIs(key, s.fields[i].key) {
				seen |= 1 << i
				values[i] = e
				return
			}
		}
		if !s.forbid {
			return
		}
		name, err := decodeString(key)
		if err == nil && !slices.Contains(extra, name) {
			extra = append(extra, name)
			v.fail(ErrExtraForbidden, "Extra inputs are not permitted", json.RawMessage(bytes.TrimSpace(e)), append(loc, name))
		}
	})
	for i := range s.fields {
		f := &s.fields[i]
		if seen&(1<<i) == 0 {
			if f.required {
				v.fail(ErrMissing, "Field required", json.RawMessage(raw), append(loc, f.keyAny))
			}
			continue
		}
		f.s.walk(v, values[i], append(loc, f.keyAny))
	}
}

// walkUnion accepts raw when a branch does. Otherwise it reports the
// errors of the one branch raw was meant for, or, when no branch or more
// than one could be meant, one error at the union itself. A branch is
// ruled out when it refuses raw at its root (raw is of another kind) or
// at raw's "type" or "role" member (an object tagged for another
// branch): the rule pydantic's error list shows, where each branch of a
// plain union reports its own errors. Branches the tags already rule out
// are not walked.
func (s *shape) walkUnion(v *validator, raw []byte, loc []any) {
	var tags [2][]byte // raw's "type" and "role", when raw is an object
	if raw[0] == '{' {
		scanMembers(raw, func(key, e []byte) {
			switch {
			case keyIs(key, "type"):
				tags[0] = e
			case keyIs(key, "role"):
				tags[1] = e
			}
		})
	}
	// Each branch's errors are appended to v and dropped again unless it
	// is the one branch raw is meant for (no scratch validator to
	// allocate).
	n0, n := len(v.errs), 0
	for _, b := range s.branches {
		if b.ruledOutByTags(raw, tags) {
			continue
		}
		start := len(v.errs)
		b.walk(v, raw, loc)
		switch {
		case len(v.errs) == start:
			v.errs = v.errs[:n0]
			return
		case rulesOut(v.errs[start:], len(loc)):
			v.errs = v.errs[:start]
		default:
			n++
		}
	}
	if n == 1 {
		return
	}
	v.errs = v.errs[:n0]
	v.fail(ErrValue, "Input does not match any member of the union", json.RawMessage(raw), loc)
}

// ruledOutByTags reports, without walking raw, that branch s would refuse
// it at its root or at its "type" or "role" member (tags holds raw's
// values of those, nil when absent): raw is of a kind s does not take, or
// s's literal type or role does not hold raw's.
func (s *shape) ruledOutByTags(raw []byte, tags [2][]byte) bool {
	if s.pre != nil || isNull(raw) {
		return false
	}
	object := raw[0] == '{'
	switch s.kind {
	case shapeObject:
		if !object {
			return true
		}
	case shapeString, shapeLiteral:
		return raw[0] != '"'
	case shapeList:
		return raw[0] != '['
	case shapeDict:
		return !object
	default:
		return false
	}
	for i, key := range []string{"type", "role"} {
		f := s.field(key)
		if f == nil || f.s.kind != shapeLiteral {
			continue
		}
		t := tags[i]
		switch {
		case t == nil:
			if f.required {
				return true
			}
		case isNull(t):
			if !f.s.nullable {
				return true
			}
		case !f.s.literalHas(bytes.TrimSpace(t)):
			return true
		}
	}
	return false
}

// rulesOut reports whether a branch's errors rule it out: one of them is
// at the union's own location (depth), or at the member that tells the
// branches apart ("type", or a chat message's "role").
func rulesOut(errs []FieldError, depth int) bool {
	for _, e := range errs {
		if len(e.Loc) == depth || len(e.Loc) == depth+1 && (e.Loc[depth] == "type" || e.Loc[depth] == "role") {
			return true
		}
	}
	return false
}

// laxNumber parses a number as pydantic's lax mode reads one: a JSON
// number, a boolean, or a string holding a number (spaces around it and
// underscores between digits allowed).
func laxNumber(raw []byte) (float64, bool) {
	switch raw[0] {
	case 't':
		return 1, true
	case 'f':
		return 0, true
	case '"':
		s, err := decodeString(raw)
		if err != nil {
			return 0, false
		}
		s = strings.TrimSpace(s)
		if strings.Contains(s, "_") {
			if strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
				return 0, false
			}
			s = strings.ReplaceAll(s, "_", "")
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errorsIsRange(err) {
			return 0, false
		}
		return f, true
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil || errorsIsRange(err)
}

func errorsIsRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// acceptsInt reports whether pydantic's int accepts raw.
func acceptsInt(raw []byte) bool {
	f, ok := laxNumber(raw)
	return ok && !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f)
}

// acceptsFloat reports whether pydantic's float accepts raw.
func acceptsFloat(raw []byte) bool {
	_, ok := laxNumber(raw)
	return ok
}

// acceptsBool reports whether pydantic's bool accepts raw.
func acceptsBool(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case 't', 'f':
		return true
	case '"':
		s, err := decodeString(raw)
		if err != nil {
			return false
		}
		_, ok := LaxBoolWord(s)
		return ok
	}
	f, ok := laxNumber(raw)
	return ok && raw[0] != '"' && (f == 0 || f == 1)
}

// Scalars decoded as pydantic's lax mode reads them: a number from a
// boolean or a numeric string, an integer from a number without a
// fraction, a boolean from 0, 1 or a word such as "yes". A value neither
// mode accepts is encoding/json's type error, naming the member.
type (
	laxFloat64 float64
	laxInt     int
	laxBool    bool
)

var (
	typeFloat64 = reflect.TypeFor[float64]()
	typeInt     = reflect.TypeFor[int]()
	typeBool    = reflect.TypeFor[bool]()
)

func (f *laxFloat64) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		return nil // null leaves the zero value, as encoding/json does
	}
	n, ok := laxNumber(b)
	if !ok || math.IsInf(n, 0) || math.IsNaN(n) {
		// A non-finite number (which pydantic takes from "inf") has no
		// JSON form to pass on.
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeFloat64}
	}
	*f = laxFloat64(n)
	return nil
}

func (i *laxInt) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		return nil // null leaves the zero value, as encoding/json does
	}
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*i = laxInt(n)
		return nil
	}
	n, ok := laxNumber(b)
	if !ok || !laxInt64(n) {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeInt}
	}
	*i = laxInt(n)
	return nil
}

// laxInt64 reports whether n is an integer an int64 holds.
func laxInt64(n float64) bool {
	return n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64
}

func (l *laxBool) decodeRaw(b []byte) error {
	b = bytes.TrimSpace(b)
	if isNull(b) {
		return nil // null leaves the zero value, as encoding/json does
	}
	if !acceptsBool(b) {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeBool}
	}
	switch b[0] {
	case 't':
		*l = true
	case 'f':
		*l = false
	case '"':
		s, _ := decodeString(b)
		v, _ := LaxBoolWord(s)
		*l = laxBool(v)
	default:
		n, _ := laxNumber(b)
		*l = n == 1
	}
	return nil
}

// LaxBoolWord reads a string as pydantic's lax mode reads it for a
// boolean: 1, on, t, true, y, yes and 0, off, f, false, n, no, in any
// case. ok is false for any other string. gymlens's own settings take
// fewer words (contract.BoolWord).
func LaxBoolWord(s string) (v, ok bool) {
	switch strings.ToLower(s) {
	case "1", "on", "t", "true", "y", "yes":
		return true, true
	case "0", "off", "f", "false", "n", "no":
		return false, true
	}
	return false, false
}

// LaxBool reads raw (one JSON value) as pydantic's lax mode reads a
// boolean: true, false, 0, 1, or a word pydantic takes ("yes", "off",
// ...). ok is false for any other value, null included.
func LaxBool(raw []byte) (v, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return false, false
	}
	var l laxBool
	if l.decodeRaw(raw) != nil {
		return false, false
	}
	return bool(l), true
}

// LaxInt reads raw (one JSON value) as pydantic's lax mode reads an
// integer: a number without a fraction, a boolean, or a string holding
// one. ok is false for any other value, null included.
func LaxInt(raw []byte) (n int, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return 0, false
	}
	var l laxInt
	if l.decodeRaw(raw) != nil {
		return 0, false
	}
	return int(l), true
}

// stripped marks a member upstream removes before it validates (a chat
// tool call's redundant outer name, _strip_outer_tool_call_names,
// nemo_gym/openai_utils.py:1133): accepted as anything, and left out of
// a normalized value.
var stripped = &shape{kind: shapeAny}

// normalize appends raw (valid JSON that s accepts) to out as pydantic
// holds it once validated and dumps it: lax scalars in their own kind
// ("5" as 5 for an integer, "yes" as true for a boolean, a number for a
// float), a list's and a dict's elements and an object's declared
// members normalized in turn, an object's members once each (the last
// of a repeated one, as Python's json module reads them) and without
// stripped ones, a union's value as the first branch that accepts it.
// Members of an object that keeps undeclared ones are kept as they came;
// values of any kind are left as they came.
func (s *shape) normalize(out, raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return append(out, "null"...)
	}
	switch s.kind {
	case shapeInt:
		return appendLaxInt(out, raw)
	case shapeFloat:
		if raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
			return append(out, raw...)
		}
		if f, ok := laxNumber(raw); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return strconv.AppendFloat(out, f, 'g', -1, 64)
		}
	case shapeBool:
		var l laxBool
		if l.decodeRaw(raw) == nil {
			return strconv.AppendBool(out, bool(l))
		}
	case shapeList:
		if raw[0] != '[' {
			break
		}
		out = append(out, '[')
		_ = scanArray(raw, func(i int, e []byte) error {
			if i > 0 {
				out = append(out, ',')
			}
			out = s.elem.normalize(out, e)
			return nil
		})
		return append(out, ']')
	case shapeDict, shapeObject:
		if raw[0] != '{' {
			break
		}
		return s.normalizeObject(out, raw)
	case shapeUnion:
		for _, b := range s.branches {
			var v validator
			b.check(&v, raw, nil)
			if len(v.errs) == 0 {
				return b.normalize(out, raw)
			}
		}
	}
	return append(out, raw...)
}

// normalizeObject is normalize for an object or a dict.
func (s *shape) normalizeObject(out, raw []byte) []byte {
	var keys [][]byte
	last := map[string][]byte{}
	scanMembers(raw, func(key, e []byte) {
		if _, seen := last[string(key)]; !seen {
			keys = append(keys, key)
		}
		last[string(key)] = e
	})
	out = append(out, '{')
	n := 0
	for _, key := range keys {
		e := last[string(key)]
		elem := s.elem
		if s.kind == shapeObject {
			elem = anyShape
			for i := range s.fields {
				if keyIs(key, s.fields[i].key) {
					elem = s.fields[i].s
					break
				}
			}
			if elem == stripped {
				continue
			}
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		out = append(out, key...)
		out = append(out, ':')
		out = elem.normalize(out, e)
	}
	return append(out, '}')
}

// appendLaxInt appends the integer pydantic reads from raw (which it
// accepts as one): an integer literal as it came, digits of a string
// without their spaces, sign and underscores' noise, else the number's
// integral value.
func appendLaxInt(out, raw []byte) []byte {
	if raw[0] == '"' {
		if s, err := decodeString(raw); err == nil {
			s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
			var n big.Int
			if _, ok := n.SetString(strings.TrimPrefix(s, "+"), 10); ok {
				return n.Append(out, 10)
			}
		}
	} else if !bytes.ContainsAny(raw, ".eE") && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return append(out, raw...)
	}
	switch f, ok := laxNumber(raw); {
	case !ok || math.IsInf(f, 0) || math.IsNaN(f):
		return append(out, raw...)
	default:
		var n big.Float
		i, _ := n.SetFloat64(f).Int(nil)
		return i.Append(out, 10)
	}
}
