// Package jsonskim reads the outline of JSON text without decoding it:
// the members of an object and the elements of a list, as slices of the
// text, found by skipping strings and matching brackets. It is for code
// that passes large bodies on (the /aggregate_metrics relays, the
// collector's request) and needs only their top level.
//
// It checks structure, not validity: a number or literal is taken as
// whatever runs to the next delimiter, and a closing bracket of the
// wrong kind is not noticed. Text from a peer that must be valid JSON
// should be checked with json.Valid, or decoded somewhere downstream.
package jsonskim

import "bytes"

// Member is one member of a JSON object, as slices of the text: Key is
// the name without its quotes, escapes left as written (see
// Member.Escaped); Value is the value's text.
type Member struct {
	Key, Value []byte
}

// Escaped reports whether the member's name holds an escape, so that
// Key is not the name itself.
func (m Member) Escaped() bool { return bytes.IndexByte(m.Key, '\\') >= 0 }

// Object returns the members of the JSON object b, in order; ok is
// false when b (less surrounding white space) is not an object of
// well-formed outline.
func Object(b []byte) (members []Member, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		end, ok := skipString(b, i)
		if !ok {
			return nil, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		end, ok = skipValue(b, i)
		if !ok {
			return nil, false
		}
		members = append(members, Member{Key: key, Value: b[i:end]})
		i = skipSpace(b, end)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return members, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// Array returns the elements of the JSON list b, in order; ok is false
// when b (less surrounding white space) is not a list of well-formed
// outline.
func Array(b []byte) (elems [][]byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return [][]byte{}, skipSpace(b, i+1) == len(b)
	}
	for {
		end, ok := skipValue(b, i)
		if !ok {
			return nil, false
		}
		elems = append(elems, b[i:end])
		i = skipSpace(b, end)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return elems, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// Kind returns the first byte of the value b (less leading white
// space): '{', '[', '"', 'n' for null and so on; 0 for none.
func Kind(b []byte) byte {
	if i := skipSpace(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that opens at b[i].
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b), false
		}
		j += q
		// The quote closes the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j, true
		}
	}
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return end, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	case '}', ']', ',', ':':
		return i, false
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, true
		case '{', '[', '"', ':':
			return j, false
		}
		j++
	}
	return j, true
}
