package protocol

// The package's own JSON codec, under its types' MarshalJSON and
// UnmarshalJSON methods: it walks JSON already checked valid, splits an
// object's members into declared and undeclared ones, and writes a wire
// struct as encoding/json would, on one line.

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gymlens/gymlens/internal/jsonskim"
	"github.com/gymlens/gymlens/internal/jsonstr"
	"github.com/gymlens/gymlens/internal/jsontag"
)

// appendMember writes `"key":value` to buf, an object being written,
// with a comma unless buf holds only the opening brace.
func appendMember(buf []byte, key string, value json.RawMessage) []byte {
	if len(buf) > 0 && buf[len(buf)-1] != '{' {
		buf = append(buf, ',')
	}
	buf = appendKey(buf, key)
	buf = append(buf, ':')
	if len(value) == 0 {
		return append(buf, "null"...)
	}
	return append(buf, value...)
}

// closeObject ends the object being written to buf.
func closeObject(buf []byte) []byte { return append(buf, '}') }

// appendKey writes key as a JSON string.
func appendKey(buf []byte, key string) []byte { return appendString(buf, key) }

// oneLine returns raw without line breaks: only layout can hold one (a
// JSON string cannot), and a member written into a JSONL line must not.
func oneLine(raw json.RawMessage) json.RawMessage {
	if !bytes.ContainsAny(raw, "\r\n") {
		return raw
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return raw
	}
	return c.Bytes()
}

// isNull reports whether raw is the JSON literal null.
func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// decodedBit marks, in a present set, a value that came from decoding
// rather than being built in Go. Validate checks a value built in Go as
// it would encode.
const decodedBit uint64 = 1 << 63

// splitMembers reads the JSON object b, which must be valid JSON, and
// returns, in order, the members whose key is not in known, plus the set
// of declared keys that were present (bit i for the key with index i) and
// the subset of those whose value was null. A repeated undeclared key
// keeps its first place and its last value, as Python's json module does.
// The values are copies, so b may be reused.
func splitMembers(b []byte, known map[string]int) (extra Fields, present, nulls uint64, err error) {
	var index map[string]int // extra's keys, once there are many
	err = scanObject(b, typeObject, func(key string, raw []byte) error {
		if i, ok := known[key]; ok {
			present |= 1 << i
			if isNull(raw) {
				nulls |= 1 << i
			} else {
				nulls &^= 1 << i
			}
			return nil
		}
		extra, index = addExtra(extra, index, key, raw)
		return nil
	})
	return extra, present, nulls, err
}

// addExtra stores a copy of raw under key in extra (replacing the value
// of a repeated key), keeping index, extra's key index once extra is
// large, up to date.
func addExtra(extra Fields, index map[string]int, key string, raw []byte) (Fields, map[string]int) {
	value := oneLine(bytes.Clone(raw))
	if j, dup := lookup(extra, index, key); dup {
		extra[j].Value = value
		return extra, index
	}
	extra = append(extra, Field{Key: key, Value: value})
	if index == nil && len(extra) > 16 {
		index = make(map[string]int, 2*len(extra))
		for j, m := range extra {
			index[m.Key] = j
		}
	} else if index != nil {
		index[key] = len(extra) - 1
	}
	return extra, index
}

// lookup finds key in extra, through index when there is one.
func lookup(extra Fields, index map[string]int, key string) (int, bool) {
	if index != nil {
		j, ok := index[key]
		return j, ok
	}
	for j, m := range extra {
		if m.Key == key {
			return j, true
		}
	}
	return 0, false
}

// checkValid returns encoding/json's error for b when b is not valid
// JSON. This package's decoders check their input once, at the top, and
// then walk it without checking again.
func checkValid(b []byte) error {
	if json.Valid(b) {
		return nil
	}
	var raw json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	return &json.SyntaxError{}
}

// scanObject calls fn, in order, with the key and the raw value of each
// member of the JSON object b, which must be valid JSON. A value that is
// not an object gives the type error encoding/json would give for typ.
func scanObject(b []byte, typ reflect.Type, fn func(key string, raw []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typ}
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := valueEnd(b, i)
		key, err := decodeString(b[i:end])
		if err != nil {
			return err
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // past ':'
		end = valueEnd(b, i)
		if err := fn(key, b[i:end]); err != nil {
			return err
		}
		i = skipSpace(b, end)
	}
	return nil
}

// scanArray calls fn with the index and raw value of each element of the
// JSON array b, which must be valid JSON.
func scanArray(b []byte, fn func(i int, raw []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return &json.UnmarshalTypeError{Value: rawKind(b), Type: typeList}
	}
	i = skipSpace(b, i+1)
	for n := 0; i < len(b) && b[i] != ']'; n++ {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := valueEnd(b, i)
		if err := fn(n, b[i:end]); err != nil {
			return err
		}
		i = skipSpace(b, end)
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the JSON value that starts at b[i] (b is
// valid JSON: jsonskim.ValueEnd's outline is the value's).
func valueEnd(b []byte, i int) int {
	end, _ := jsonskim.ValueEnd(b, i)
	return end
}

// decodeString decodes the JSON string raw (valid JSON) as
// encoding/json does: escapes resolved, and an invalid UTF-8 byte or a
// lone surrogate replaced by U+FFFD.
func decodeString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", &json.UnmarshalTypeError{Value: rawKind(raw), Type: typeString}
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); {
		c := inner[i]
		switch {
		case c == '\\' && i+1 < len(inner):
			e := inner[i+1]
			i += 2
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(inner[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(inner) && inner[i] == '\\' && inner[i+1] == 'u' {
						r2 = hex4(inner[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default: // '"', '\\', '/'
				out = append(out, e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, inner[i:i+size]...)
			}
			i += size
		}
	}
	return string(out), nil
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (jsonstr.Append).
func appendString(buf []byte, s string) []byte { return jsonstr.Append(buf, s) }

// rawKind names the JSON kind of the value raw, as encoding/json's type
// errors do.
func rawKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "null"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// wireField is one tagged member of a wire struct.
type wireField struct {
	key       string
	index     int  // struct field index
	omitEmpty bool // the member is left out when empty
}

// wireInfo describes the members of a wire struct.
type wireInfo struct {
	keys   map[string]int // member name -> bit
	fields []wireField    // by bit
}

// wireOf returns the JSON members a struct type declares (its own
// fields that a json tag names, in field order: jsontag.Fields less the
// promoted and untagged ones), computed once per type.
func wireOf(t reflect.Type) *wireInfo {
	if v, ok := keyCache.Load(t); ok {
		return v.(*wireInfo)
	}
	info := &wireInfo{keys: map[string]int{}}
	for _, f := range jsontag.Fields(t) {
		if !f.Tagged || len(f.Index) != 1 {
			continue
		}
		info.keys[f.Name] = len(info.fields)
		info.fields = append(info.fields, wireField{key: f.Name, index: f.Index[0], omitEmpty: f.OmitEmpty})
	}
	if len(info.fields) > 63 {
		panic("protocol: more than 63 declared members in " + t.String())
	}
	keyCache.Store(t, info)
	return info
}

// keysOf returns the JSON member names a struct type declares, each with
// its bit.
func keysOf(t reflect.Type) map[string]int { return wireOf(t).keys }

var keyCache sync.Map // reflect.Type -> *wireInfo

// decodeObject decodes the JSON object b, which must be valid JSON, into
// plain (a pointer to a method-less struct with json tags), matching
// member names exactly, as upstream does (encoding/json would also fill a
// field from a member whose name differs only in case). It returns the
// members plain does not declare, the bit set of declared members that
// were present (bit i for the i-th tagged field) and the subset of those
// that were null. A type error names its location below b.
func decodeObject(b []byte, plain any) (extra Fields, present, nulls uint64, err error) {
	v := reflect.ValueOf(plain).Elem()
	info := wireOf(v.Type())
	var index map[string]int
	err = scanObject(b, v.Type(), func(key string, raw []byte) error {
		i, ok := info.keys[key]
		if !ok {
			extra, index = addExtra(extra, index, key, raw)
			return nil
		}
		present |= 1 << i
		if isNull(raw) {
			nulls |= 1 << i
		} else {
			nulls &^= 1 << i
		}
		return withField(decodeValue(raw, v.Field(info.fields[i].index)), key)
	})
	return extra, present, nulls, err
}

// rawDecoder is implemented by this package's types: decodeRaw decodes
// b, which its caller has checked is valid JSON.
type rawDecoder interface {
	decodeRaw(b []byte) error
}

// decodeChecked checks that b is valid JSON, then decodes it into d: the
// work of every UnmarshalJSON method of this package.
func decodeChecked(b []byte, d rawDecoder) error {
	if err := checkValid(b); err != nil {
		return err
	}
	return d.decodeRaw(b)
}

var (
	typeRawMessage = reflect.TypeFor[json.RawMessage]()
	typeObject     = reflect.TypeFor[map[string]any]()
	typeList       = reflect.TypeFor[[]any]()
	typeString     = reflect.TypeFor[string]()
)

// decodeValue decodes raw, valid JSON, into dst (addressable), as
// encoding/json would: the last of repeated members wins whole, null
// leaves a pointer, slice or map nil, and a list's type errors name the
// index of the offending element.
func decodeValue(raw []byte, dst reflect.Value) error {
	dst.SetZero()
	if d, ok := dst.Addr().Interface().(rawDecoder); ok && dst.Kind() != reflect.Slice {
		return d.decodeRaw(raw)
	}
	if dst.Type() == typeRawMessage {
		dst.SetBytes(bytes.Clone(raw))
		return nil
	}
	if isNull(raw) {
		return nil
	}
	switch dst.Kind() {
	case reflect.Pointer:
		p := reflect.New(dst.Type().Elem())
		if err := decodeValue(raw, p.Elem()); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	case reflect.String:
		if raw[0] == '"' {
			s, err := decodeString(raw)
			dst.SetString(s)
			return err
		}
	case reflect.Bool:
		if raw[0] == 't' || raw[0] == 'f' {
			dst.SetBool(raw[0] == 't')
			return nil
		}
	case reflect.Int, reflect.Int64:
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && !dst.OverflowInt(n) {
			dst.SetInt(n)
			return nil
		}
	case reflect.Float64:
		if raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
			if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
				dst.SetFloat(f)
				return nil
			}
		}
	case reflect.Slice:
		if raw[0] == '[' && dst.Type().Elem().Kind() != reflect.Uint8 {
			elem := dst.Type().Elem()
			list := reflect.MakeSlice(dst.Type(), 0, 4)
			err := scanArray(raw, func(i int, e []byte) error {
				list = reflect.Append(list, reflect.Zero(elem))
				return withField(decodeValue(e, list.Index(i)), strconv.Itoa(i))
			})
			dst.Set(list)
			return err
		}
	}
	return json.Unmarshal(raw, dst.Addr().Interface())
}

// withField puts key in front of the location of a type error.
func withField(err error, key string) error {
	if typ, ok := err.(*json.UnmarshalTypeError); ok {
		if typ.Field == "" {
			typ.Field = key
		} else {
			typ.Field = key + "." + typ.Field
		}
	}
	return err
}

// rawEncoder is implemented by this package's types: appendJSON
// appends the value's JSON encoding, on one line, to buf.
type rawEncoder interface {
	appendJSON(buf []byte) ([]byte, error)
}

// encodeObject appends to buf the JSON object of plain (a pointer to a
// wire struct): its members in order, encoding/json's omitempty applied,
// except that a member in nulls that would be left out is written as null
// (a member that arrived as null goes back as null); then extra's
// members, but for any that plain already wrote: a declared member always
// wins over an undeclared one of the same name, so no key appears twice.
func encodeObject(buf []byte, plain any, extra Fields, nulls uint64) ([]byte, error) {
	v := reflect.ValueOf(plain).Elem()
	info := wireOf(v.Type())
	buf = append(buf, '{')
	first := true
	var written uint64
	for i, f := range info.fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) && nulls&(1<<i) == 0 {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendKey(buf, f.key)
		buf = append(buf, ':')
		written |= 1 << i
		if f.omitEmpty && isEmptyValue(fv) {
			buf = append(buf, "null"...)
			continue
		}
		var err error
		if buf, err = appendValue(buf, fv); err != nil {
			return nil, err
		}
	}
	for _, m := range extra {
		if i, ok := info.keys[m.Key]; ok && written&(1<<i) != 0 {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendKey(buf, m.Key)
		buf = append(buf, ':')
		if len(m.Value) == 0 {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, m.Value...)
		}
	}
	return append(buf, '}'), nil
}

// appendValue appends the JSON encoding of v (addressable) to buf, as
// encoding/json would write it, on one line.
func appendValue(buf []byte, v reflect.Value) ([]byte, error) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return append(buf, "null"...), nil
		}
		v = v.Elem()
	}
	if v.Type() == typeRawMessage {
		raw := v.Bytes()
		if len(raw) == 0 {
			return append(buf, "null"...), nil
		}
		if !json.Valid(raw) {
			_, err := json.Marshal(v.Interface())
			return nil, err
		}
		return append(buf, oneLine(raw)...), nil
	}
	if e, ok := v.Addr().Interface().(rawEncoder); ok {
		return e.appendJSON(buf)
	}
	switch v.Kind() {
	case reflect.String:
		return appendString(buf, v.String()), nil
	case reflect.Bool:
		return strconv.AppendBool(buf, v.Bool()), nil
	case reflect.Int, reflect.Int64:
		return strconv.AppendInt(buf, v.Int(), 10), nil
	case reflect.Float64:
		if f := v.Float(); !math.IsInf(f, 0) && !math.IsNaN(f) {
			return AppendJSONFloat(buf, f), nil
		}
	case reflect.Slice:
		if v.IsNil() {
			return append(buf, "null"...), nil
		}
		buf = append(buf, '[')
		for i := range v.Len() {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendValue(buf, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	}
	b, err := json.Marshal(v.Addr().Interface())
	return append(buf, b...), err
}

// AppendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal that reads back as f, in exponent form only below
// 1e-6 or from 1e21 up. f must be finite.
func AppendJSONFloat(buf []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf
}

// isEmptyValue reports whether encoding/json's omitempty leaves v out.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
