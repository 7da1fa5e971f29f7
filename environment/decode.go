package environment

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/gymlens/gymlens/internal/jsontag"
	"github.com/gymlens/gymlens/protocol"
)

// A decoder fills a Go value from the members of a JSON object (a row's
// task fields, a seed body, a tool's arguments) the way a pydantic model
// with extra=ignore reads them: each declared member is taken by its
// exact name, every other member is ignored, and a member marked
// required must be there. A type error names the member, as FastAPI's
// 422 body does.
//
// Struct types are read member by member: an exported field is the
// member its json tag names (the field name without one; "-" skips it),
// and fields of an embedded struct (or pointer to one) without a tag count
// as the outer struct's own, a shallower field winning over a deeper one
// of the same name, as encoding/json reads them (jsontag.Fields). Any
// other type is decoded from the whole object with encoding/json.
type decoder struct {
	fields []fieldInfo // struct types
	whole  bool        // any other type
	// validate: *T has a Validate() error method, called after decoding.
	validate bool
}

// fieldInfo is one member a struct type declares.
type fieldInfo struct {
	key         string
	index       []int
	typ         reflect.Type
	required    bool
	omitEmpty   bool
	description string
}

// The struct tag of this package, and the option it knows.
const (
	tagName     = "gym"
	tagRequired = "required"
	// tagDescription is the struct tag a tool argument's schema takes its
	// description from.
	tagDescription = "description"
)

var decoders sync.Map // reflect.Type -> *decoder

var validatorType = reflect.TypeFor[interface{ Validate() error }]()

// decoderOf returns the decoder of t, built once per type.
func decoderOf(t reflect.Type) *decoder {
	if d, ok := decoders.Load(t); ok {
		return d.(*decoder)
	}
	d := &decoder{validate: reflect.PointerTo(t).Implements(validatorType)}
	if t.Kind() == reflect.Struct {
		d.fields = structFields(t)
	} else {
		d.whole = true
	}
	actual, _ := decoders.LoadOrStore(t, d)
	return actual.(*decoder)
}

// structFields lists the members a struct type declares, in field order
// (jsontag.Fields).
func structFields(t reflect.Type) []fieldInfo {
	var fields []fieldInfo
	for _, f := range jsontag.Fields(t) {
		fields = append(fields, fieldInfo{key: f.Name, index: f.Index, typ: f.Type,
			omitEmpty:   f.OmitEmpty,
			required:    hasOption(f.Tag.Get(tagName), tagRequired),
			description: f.Tag.Get(tagDescription)})
	}
	return fields
}

// hasOption reports whether the comma-separated tag options hold opt.
func hasOption(opts, opt string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if strings.TrimSpace(o) == opt {
			return true
		}
	}
	return false
}

// decodeFields decodes the members in fields into a fresh T. The error,
// if any, is a *protocol.ValidationError whose locations are relative to
// the object (the caller prefixes "body").
func decodeFields[T any](fields protocol.Fields) (T, error) {
	var v T
	d := decoderOf(reflect.TypeFor[T]())
	err := d.decode(fields, reflect.ValueOf(&v).Elem())
	return v, err
}

func (d *decoder) decode(fields protocol.Fields, dst reflect.Value) error {
	var errs []protocol.FieldError
	if d.whole {
		raw, _ := fields.MarshalJSON()
		if err := json.Unmarshal(raw, dst.Addr().Interface()); err != nil {
			errs = append(errs, fieldError(err, nil, raw)...)
		}
	} else {
		for i := range d.fields {
			f := &d.fields[i]
			raw, ok := fields.Get(f.key)
			if !ok {
				if f.required {
					errs = append(errs, protocol.FieldError{Type: protocol.ErrMissing, Loc: []any{f.key},
						Msg: "Field required", Input: json.RawMessage("null")})
				}
				continue
			}
			if f.required && string(raw) == "null" && f.typ.Kind() != reflect.Interface {
				kind, msg := kindMessage(f.typ)
				errs = append(errs, protocol.FieldError{Type: kind, Loc: []any{f.key}, Msg: msg, Input: raw})
				continue
			}
			if err := json.Unmarshal(raw, jsontag.Settable(dst, f.index).Addr().Interface()); err != nil {
				errs = append(errs, fieldError(err, []any{f.key}, raw)...)
			}
		}
	}
	if len(errs) == 0 && d.validate {
		if err := dst.Addr().Interface().(interface{ Validate() error }).Validate(); err != nil {
			return protocol.DecodeError(err)
		}
	}
	if len(errs) > 0 {
		return &protocol.ValidationError{Detail: errs}
	}
	return nil
}

// fieldError turns an error decoding raw, the value at loc, into the
// entries of a 422 body.
func fieldError(err error, loc []any, raw json.RawMessage) []protocol.FieldError {
	var typ *json.UnmarshalTypeError
	atValue := errors.As(err, &typ) && typ.Field == ""
	ve := protocol.DecodeError(err, loc...)
	for i := range ve.Detail {
		if atValue {
			// The value itself has the wrong kind: show it, as pydantic
			// does, rather than encoding/json's name of its kind.
			ve.Detail[i].Input = raw
		}
	}
	return ve.Detail
}

// kindMessage is pydantic's error type and message for a null where a
// value of Go type t is required.
func kindMessage(t reflect.Type) (string, string) {
	ve := protocol.DecodeError(&json.UnmarshalTypeError{Value: "null", Type: t})
	return ve.Detail[0].Type, ve.Detail[0].Msg
}
