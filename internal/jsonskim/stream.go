package jsonskim

// ValueEnd returns the index after the JSON value that starts at b[i]
// (no space before it), found by its outline as Object and Array find
// theirs; ok is false when b ends before the value does, or the value is
// not one JSON can start with. It checks structure, not validity.
func ValueEnd(b []byte, i int) (end int, ok bool) { return skipValue(b, i) }

// SkipSpace returns the index of the first byte at or after i that is
// not JSON white space.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

// End returns the index after the value that starts at b[i], for b known
// to be valid JSON (ValueEnd without its ok, which valid JSON makes
// true).
func End(b []byte, i int) int {
	end, _ := skipValue(b, i)
	return end
}
