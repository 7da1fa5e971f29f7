// Package jsontag lists the JSON members a Go struct type declares through
// its json tags, by encoding/json's rules, for the packages that check or
// decode a JSON object member by member (the server registry's config
// check, the environment's pydantic-style decoder). It is the module's one
// walker of json struct tags.
package jsontag

import (
	"reflect"
	"strings"
)

// Field is one JSON member of a struct type.
type Field struct {
	// Name is the member's name: the json tag's name, else the Go field's.
	Name string
	// Index is the field's index sequence from the outer struct
	// (reflect.Value.FieldByIndex; Settable for one that passes through an
	// embedded pointer).
	Index []int
	// Type is the field's Go type.
	Type reflect.Type
	// Tagged reports whether the json tag named the member.
	Tagged bool
	// OmitEmpty reports the tag's omitempty option.
	OmitEmpty bool
	// Tag is the field's whole struct tag, for the tags of other packages.
	Tag reflect.StructTag
}

// Fields returns the JSON members of struct type t (or of the struct a
// pointer type points to) in field order, as encoding/json reads them:
//
//   - a field tagged "-" is skipped, as is an unexported field;
//   - the fields of an embedded struct, or of an embedded pointer to one,
//     whose tag gives no name count as the outer struct's own (an
//     unexported embedded pointer is skipped: nothing can set it);
//   - where several fields claim one name, the shallowest wins; among
//     equally shallow ones a tagged field wins over untagged ones, and a
//     name still contested is dropped.
//
// Any other type has no members.
func Fields(t reflect.Type) []Field {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var all []Field
	collect(t, nil, map[reflect.Type]bool{}, &all)

	// Each name goes to its shallowest fields; of those, to the one field,
	// or else to the one tagged field, or to none.
	type claim struct{ depth, fields, tagged, pick int }
	claims := map[string]*claim{}
	for i, f := range all {
		c := claims[f.Name]
		switch {
		case c == nil || len(f.Index) < c.depth:
			c = &claim{depth: len(f.Index)}
			claims[f.Name] = c
		case len(f.Index) > c.depth:
			continue
		}
		c.fields++
		if f.Tagged {
			c.tagged++
		}
		if c.fields == 1 || (f.Tagged && c.tagged == 1) {
			c.pick = i
		}
	}
	out := make([]Field, 0, len(claims))
	for i, f := range all {
		c := claims[f.Name]
		if c.pick == i && (c.fields == 1 || c.tagged == 1) {
			out = append(out, f)
		}
	}
	return out
}

// collect appends the candidate members of struct type t, found at index
// prefix, to out, in field order; seen holds the embedded types on the path
// to t, so that a type embedding a pointer to itself ends.
func collect(t reflect.Type, prefix []int, seen map[reflect.Type]bool, out *[]Field) {
	if seen[t] {
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		index := append(append(make([]int, 0, len(prefix)+1), prefix...), i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer && f.IsExported() {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collect(ft, index, seen, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		field := Field{Name: name, Index: index, Type: f.Type, Tagged: name != "", OmitEmpty: hasOption(opts, "omitempty"), Tag: f.Tag}
		if name == "" {
			field.Name = f.Name
		}
		*out = append(*out, field)
	}
}

// hasOption reports whether the comma-separated tag options opts hold opt.
func hasOption(opts, opt string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == opt {
			return true
		}
	}
	return false
}

// Settable returns the field of struct value v at index (Field.Index),
// allocating every nil embedded pointer on the way, as encoding/json does
// when it decodes into a promoted field. v must be addressable.
func Settable(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}
