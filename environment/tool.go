package environment

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// A ToolOption adjusts one tool of Tool.
type ToolOption func(*tool)

// tool is one tool route.
type tool struct {
	def      protocol.Tool
	register func(s *server.Server)
	// strictSet: Strict was given, keep it whatever the schema.
	strictSet bool
}

// toolName is the shape of a function name the Responses API accepts; it
// is also a safe path segment.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// reservedNames are the routes every resources server has: a tool of the
// same name would shadow one of them.
var reservedNames = map[string]bool{
	"seed_session": true, "verify": true, "aggregate_metrics": true, "reverify_mode": true,
	"health": true, "mcp": true,
}

// Tool adds a tool the model can call: POST /<name> decodes the request
// body, the call's arguments object, into A and answers with fn's result
// encoded as JSON. Upstream's agent hands that body, whatever its status,
// to the model as the tool's output, so an error fn returns reaches the
// model too: an *Error (see Errorf) as {"detail": msg}, any other
// error as a JSON string with status 500.
//
// A is read like a task (see Verify): by exact member name, unknown
// members ignored, fields tagged `gym:"required"` required. Arguments
// that do not fit are a 422 naming the member, before fn runs.
//
// The tool's definition, listed by Environment.Tools for datasets to put
// in responses_create_params.tools, carries description and a JSON
// schema of A: derived from A's fields (json names; string, boolean,
// integer, number, array and object types; a `description:"..."` tag
// describes a field; required fields are listed as required; unknown
// members are not allowed) unless Parameters gives one. The tool is
// strict when every field of every object in the schema is required, or
// as Strict says.
//
// A must be a struct or a map with string keys (arguments are always an
// object), name must be 1 to 64 letters, digits, '_' or '-' and must not
// be one of the server's own routes; New panics otherwise.
func Tool[A, R any](name, description string, fn func(ctx context.Context, args A) (R, error), opts ...ToolOption) Option {
	return func(e *Environment) {
		if !toolName.MatchString(name) {
			panic(fmt.Sprintf("environment: tool name %q: want 1 to 64 letters, digits, '_' or '-'", name))
		}
		if reservedNames[name] {
			panic(fmt.Sprintf("environment: tool name %q is a route of every resources server", name))
		}
		if fn == nil {
			panic(fmt.Sprintf("environment: tool %q has a nil function", name))
		}
		at := reflect.TypeFor[A]()
		if k := deref(at).Kind(); k != reflect.Struct && (k != reflect.Map || deref(at).Key().Kind() != reflect.String) {
			panic(fmt.Sprintf("environment: tool %q: arguments type %v is not a struct or a map with string keys", name, at))
		}
		for _, t := range e.tools {
			if t.def.Name == name {
				panic(fmt.Sprintf("environment: tool %q added twice", name))
			}
		}
		schema, strict := schemaOf(at)
		t := &tool{def: protocol.FunctionTool(name, description, schema)}
		*t.def.Strict = strict
		for _, o := range opts {
			o(t)
		}
		t.register = func(s *server.Server) {
			server.Handle(s, "POST /"+name, func(ctx context.Context, body protocol.Fields) (R, error) {
				args, err := decodeFields[A](body)
				if err != nil {
					var zero R
					return zero, protocol.DecodeError(err, "body")
				}
				return fn(ctx, args)
			})
		}
		e.tools = append(e.tools, t)
	}
}

// Parameters sets the tool's parameters schema, a JSON schema object,
// instead of the one derived from its arguments type; the tool is then
// not strict unless Strict says so. Decoding still follows the
// arguments type.
func Parameters(schema json.RawMessage) ToolOption {
	return func(t *tool) {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(schema, &probe); err != nil || probe == nil {
			panic(fmt.Sprintf("environment: tool %q: parameters must be a JSON object", t.def.Name))
		}
		t.def.Parameters = append(json.RawMessage(nil), schema...)
		if !t.strictSet {
			*t.def.Strict = false
		}
	}
}

// Strict sets the tool's strict flag, which asks the model's API to
// follow the parameters schema exactly (every property required, no
// other members).
func Strict(strict bool) ToolOption {
	return func(t *tool) {
		*t.def.Strict = strict
		t.strictSet = true
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	numberType      = reflect.TypeFor[json.Number]()
)

// schemaOf derives the JSON schema of a tool's arguments type, and
// whether it suits strict mode.
func schemaOf(t reflect.Type) (json.RawMessage, bool) {
	b := schemaBuilder{strict: true, seen: map[reflect.Type]bool{}}
	raw := b.of(t)
	return raw, b.strict
}

type schemaBuilder struct {
	strict bool
	seen   map[reflect.Type]bool
}

// typed returns {"type": name}.
func typed(name string) protocol.Fields {
	var f protocol.Fields
	_ = f.Set("type", name)
	return f
}

func (b *schemaBuilder) of(t reflect.Type) json.RawMessage {
	t = deref(t)
	if t == numberType {
		return mustJSON(typed("number"))
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface {
		// Decoded by its own rules: any JSON value, as far as the schema
		// can tell.
		b.strict = false
		return json.RawMessage("{}")
	}
	switch t.Kind() {
	case reflect.Bool:
		return mustJSON(typed("boolean"))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return mustJSON(typed("integer"))
	case reflect.Float32, reflect.Float64:
		return mustJSON(typed("number"))
	case reflect.String:
		return mustJSON(typed("string"))
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return mustJSON(typed("string")) // encoding/json's base64
		}
		f := typed("array")
		f.SetRaw("items", b.of(t.Elem()))
		return mustJSON(f)
	case reflect.Map:
		b.strict = false
		f := typed("object")
		f.SetRaw("additionalProperties", b.of(t.Elem()))
		return mustJSON(f)
	case reflect.Struct:
		if b.seen[t] {
			b.strict = false
			return json.RawMessage("{}")
		}
		b.seen[t] = true
		defer delete(b.seen, t)
		var props protocol.Fields
		required := []string{}
		for _, fi := range decoderOf(t).fields {
			s := b.of(fi.typ)
			if fi.description != "" {
				var withDesc protocol.Fields
				_ = json.Unmarshal(s, &withDesc)
				_ = withDesc.Set("description", fi.description)
				s = mustJSON(withDesc)
			}
			props.SetRaw(fi.key, s)
			if fi.required {
				required = append(required, fi.key)
			} else {
				b.strict = false
			}
		}
		f := typed("object")
		f.SetRaw("properties", mustJSON(props))
		_ = f.Set("required", required)
		_ = f.Set("additionalProperties", false)
		return mustJSON(f)
	}
	b.strict = false
	return json.RawMessage("{}")
}

func mustJSON(f protocol.Fields) json.RawMessage {
	raw, _ := f.MarshalJSON()
	return raw
}
