package equivalence

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"strings"
)

// Normalize prepares a string for comparison the way the upstream server
// does in Python: s.strip(), then .lower(), then every run of whitespace
// replaced by a single space. See the package documentation for the
// character classes involved. Invalid UTF-8 bytes become U+FFFD.
func Normalize(s string) string {
	return string(normalizeRunes([]rune(s)))
}

// normalizeRunes is Normalize on code points. It does not modify r; the
// result is a new slice.
func normalizeRunes(r []rune) []rune {
	lo, hi := 0, len(r)
	for lo < hi && pystr.IsSpace(r[lo]) {
		lo++
	}
	for hi > lo && pystr.IsSpace(r[hi-1]) {
		hi--
	}
	r = r[lo:hi]

	// Lowercasing and whitespace collapsing are done in one pass. That is
	// equivalent to doing them one after the other because lowercasing
	// maps no whitespace to anything else and nothing else to whitespace.
	out := make([]rune, 0, len(r)+1)
	inSpace := false
	for i, c := range r {
		if pystr.IsSpace(c) {
			if !inSpace {
				out = append(out, ' ')
				inSpace = true
			}
			continue
		}
		inSpace = false
		out = pystr.AppendLower(out, r, i)
	}
	return out
}

// JoinTexts builds the answer from the output_text part texts of a
// response, in order: they are concatenated with no separator.
func JoinTexts(texts []string) string {
	return strings.Join(texts, "")
}
