package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Field is one JSON object member a type does not declare, kept verbatim.
type Field struct {
	Key   string
	Value json.RawMessage
}

// Fields holds the members of a JSON object that its Go type does not
// declare, in the order they arrived. Upstream's agent and resources
// servers pass a dataset row's task fields through untouched (and echo
// them on /verify), so nothing a caller sends may be lost on the way.
//
// The zero value is an empty set, ready to use.
type Fields []Field

// Get returns the raw value of key and whether it is present.
func (f Fields) Get(key string) (json.RawMessage, bool) {
	for _, m := range f {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// Has reports whether key is present.
func (f Fields) Has(key string) bool {
	_, ok := f.Get(key)
	return ok
}

// Decode unmarshals the value of key into dst. A missing key leaves dst
// untouched and returns false with a nil error.
func (f Fields) Decode(key string, dst any) (bool, error) {
	raw, ok := f.Get(key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, fmt.Errorf("field %s: %w", key, err)
	}
	return true, nil
}

// Set encodes v and stores it under key, replacing an existing value in
// place or appending a new member.
func (f *Fields) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("field %s: %w", key, err)
	}
	f.SetRaw(key, raw)
	return nil
}

// SetRaw stores raw (which must be valid JSON) under key. A value that
// spans lines is compacted, so that the member can go into a JSONL line.
func (f *Fields) SetRaw(key string, raw json.RawMessage) {
	raw = oneLine(raw)
	for i := range *f {
		if (*f)[i].Key == key {
			(*f)[i].Value = raw
			return
		}
	}
	*f = append(*f, Field{Key: key, Value: raw})
}

// Delete removes key.
func (f *Fields) Delete(key string) {
	*f = slices.DeleteFunc(*f, func(m Field) bool { return m.Key == key })
}

// Clone returns a copy that shares no slice with f.
func (f Fields) Clone() Fields {
	if f == nil {
		return nil
	}
	out := make(Fields, len(f))
	for i, m := range f {
		out[i] = Field{Key: m.Key, Value: bytes.Clone(m.Value)}
	}
	return out
}

// MarshalJSON encodes f as one JSON object.
func (f Fields) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for _, m := range f {
		buf = appendMember(buf, m.Key, m.Value)
	}
	return closeObject(buf), nil
}

// UnmarshalJSON decodes every member of a JSON object into f.
func (f *Fields) UnmarshalJSON(b []byte) error {
	if err := checkValid(b); err != nil {
		return err
	}
	members, _, _, err := splitMembers(b, nil)
	if err != nil {
		return err
	}
	*f = members
	return nil
}
