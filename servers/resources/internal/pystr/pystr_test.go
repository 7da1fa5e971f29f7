package pystr

import "testing"

// TestLower holds Lower and AppendLower to what CPython's str.lower()
// gives: ASCII, the dotted capital I, capital sigma in and at the end of
// a word (case-ignorable characters skipped), and invalid UTF-8 kept.
func TestLower(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"ABC", "abc"},
		{"ΑΣ", "ας"},
		{"ΑΣ.", "ας."},
		{"ΑΣΑ", "ασα"},
		{"Σ", "σ"},
		{"A Σ", "a σ"},
		{"ΑΣ'Α", "ασ'α"},
		{"İ", "i\u0307"},
		{"ΟΔΟΣ ΣΑΣ. İ", "\u03bf\u03b4\u03bf\u03c2 \u03c3\u03b1\u03c2. i\u0307"},
		{"x\xffY", "x\xffy"},
	} {
		if got := Lower(tt.in); got != tt.want {
			t.Errorf("Lower(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.in == "x\xffY" {
			continue // runes hold no invalid UTF-8
		}
		rs := []rune(tt.in)
		var out []rune
		for i := range rs {
			out = AppendLower(out, rs, i)
		}
		if string(out) != tt.want {
			t.Errorf("AppendLower over %q = %q, want %q", tt.in, string(out), tt.want)
		}
	}
}
