package jsonskim

// ValueEnd returns the index after the JSON value that starts at b[i]
// (no space before it), found by its outline as Object and Array find
// theirs; ok is false when b ends before the value does, or the value is
// not one JSON can start with. It checks structure, not validity.
func ValueEnd(b []byte, i int) (end int, ok bool) { return skipValue(b, i) }
