package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Kinds of FieldError, as pydantic names them in a FastAPI 422 body.
const (
	ErrMissing        = "missing"
	ErrExtraForbidden = "extra_forbidden"
	ErrJSONInvalid    = "json_invalid"
	ErrModelType      = "model_type"
	ErrLiteral        = "literal_error"
	ErrValue          = "value_error"
	ErrString         = "string_type"
	ErrInt            = "int_type"
	ErrFloat          = "float_type"
	ErrBool           = "bool_type"
	ErrList           = "list_type"
	ErrDict           = "dict_type"
)

// FieldError is one entry of the `detail` list of a validation failure,
// shaped as FastAPI answers a request its pydantic models refuse.
type FieldError struct {
	// Type is the kind of failure, one of the Err* constants.
	Type string `json:"type"`
	// Loc is the path to the offending value; a request body's paths start
	// with "body". Elements are member names (string) or list indexes
	// (int).
	Loc []any `json:"loc"`
	// Msg says what is wrong, in pydantic's words.
	Msg string `json:"msg"`
	// Input is the offending value (for a missing member, the object that
	// lacks it); nil encodes as null.
	Input json.RawMessage `json:"input"`
}

// ValidationError is a request that decodes as JSON but does not satisfy
// the protocol's schema: HTTP 422 with the body
// {"detail":[FieldError...]}.
type ValidationError struct {
	Detail []FieldError `json:"detail"`
}

func (e *ValidationError) Error() string {
	if len(e.Detail) == 0 {
		return "validation failed"
	}
	var b strings.Builder
	for i, d := range e.Detail {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(LocString(d.Loc))
		b.WriteString(": ")
		b.WriteString(d.Msg)
	}
	if len(e.Detail) > 1 {
		return fmt.Sprintf("%d validation errors: %s", len(e.Detail), b.String())
	}
	return "validation error: " + b.String()
}

// LocString joins a location as "a.b[2].c".
func LocString(loc []any) string {
	var b strings.Builder
	for _, p := range loc {
		switch v := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

// DetailBody is the JSON body FastAPI sends for an error that is not a
// validation failure, such as {"detail":"Not Found"}.
type DetailBody struct {
	Detail string `json:"detail"`
}

// NotFoundBody is the body of a 404 for an unknown route.
var NotFoundBody = DetailBody{Detail: "Not Found"}

// validator collects FieldErrors under a path.
type validator struct {
	errs []FieldError
}

func (v *validator) add(kind, msg string, input json.RawMessage, loc ...any) {
	v.errs = append(v.errs, FieldError{Type: kind, Loc: loc, Msg: msg, Input: input})
}

func (v *validator) missing(parent json.RawMessage, loc ...any) {
	v.add(ErrMissing, "Field required", parent, loc...)
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &ValidationError{Detail: v.errs}
}

// at returns loc + more as a fresh slice.
func at(loc []any, more ...any) []any {
	out := make([]any, 0, len(loc)+len(more))
	return append(append(out, loc...), more...)
}

// mustRaw encodes v for a FieldError's input.
func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// DecodeError turns an error from decoding a request body (encoding/json
// or this package's own decoders) into the FieldErrors FastAPI would
// answer with, under the location prefix (such as "body"). Errors that
// are already a *ValidationError get the prefix added. A nil error gives
// nil.
func DecodeError(err error, prefix ...any) *ValidationError {
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		out := &ValidationError{Detail: make([]FieldError, len(ve.Detail))}
		for i, d := range ve.Detail {
			d.Loc = at(prefix, d.Loc...)
			out.Detail[i] = d
		}
		return out
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &ValidationError{Detail: []FieldError{{Type: ErrJSONInvalid, Loc: at(prefix, int(syn.Offset)),
			Msg: "JSON decode error", Input: json.RawMessage("{}")}}}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &ValidationError{Detail: []FieldError{{Type: ErrJSONInvalid, Loc: at(prefix, 0),
			Msg: "JSON decode error", Input: json.RawMessage("{}")}}}
	case errors.As(err, &typ):
		loc := prefix
		if typ.Field != "" {
			loc = at(prefix)
			for _, p := range strings.Split(typ.Field, ".") {
				if n, err := strconv.Atoi(p); err == nil {
					loc = append(loc, n)
				} else {
					loc = append(loc, p)
				}
			}
		}
		kind, msg := typeMessage(typ.Type)
		return &ValidationError{Detail: []FieldError{{Type: kind, Loc: loc, Msg: msg,
			Input: mustRaw(typ.Value)}}}
	}
	return &ValidationError{Detail: []FieldError{{Type: ErrValue, Loc: prefix, Msg: "Value error, " + err.Error()}}}
}

// typeMessage gives pydantic's kind and message for a value that should
// have had Go type t.
func typeMessage(t reflect.Type) (string, string) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ErrValue, "Input is not valid"
	}
	switch t.Kind() {
	case reflect.String:
		return ErrString, "Input should be a valid string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return ErrInt, "Input should be a valid integer"
	case reflect.Float32, reflect.Float64:
		return ErrFloat, "Input should be a valid number"
	case reflect.Bool:
		return ErrBool, "Input should be a valid boolean"
	case reflect.Slice, reflect.Array:
		return ErrList, "Input should be a valid list"
	case reflect.Map:
		return ErrDict, "Input should be a valid dictionary"
	}
	return ErrModelType, "Input should be a valid dictionary or object to extract fields from"
}
