package stringmatch

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"fmt"
	"strings"
	"unicode/utf8"
)

// boxedOpen starts a \boxed{...} group.
const boxedOpen = `\boxed{`

// textOpen starts a \text{...} wrapper.
const textOpen = `\text{`

// Extract returns the candidate answer that mode picks out of text (see
// the package documentation for the rules). ok is false when the mode
// finds nothing, which upstream reports as a null extracted_answer; an
// empty answer with ok true is possible (from "\boxed{}", or a label
// followed by nothing but a full stop). err is
// non-nil, wrapping ErrInvalidTask, only for an unknown mode; "" is not a
// mode here (Task.Mode resolves a missing mode to the default).
func Extract(text, mode string) (answer string, ok bool, err error) {
	switch mode {
	case ModeBoxed:
		answer, ok = extractBoxed(text)
	case ModeFinalAnswer:
		if answer, ok = extractFinalAnswer(text); !ok {
			answer, ok = extractBoxed(text)
		}
	case ModeLastLine:
		answer, ok = extractLastLine(text)
	case ModeFullResponse:
		answer = pystr.Strip(text)
		ok = answer != ""
	default:
		return "", false, fmt.Errorf("%w: extraction_mode %q is not one of %s", ErrInvalidTask, mode,
			strings.Join(ExtractionModes(), ", "))
	}
	return answer, ok, nil
}

// extractBoxed returns the content of the last \boxed{ whose braces
// balance before the end of text: an unbalanced later group does not hide
// an earlier balanced one. The content is trimmed and unwrapped from
// whole-value \text{...} wrappers.
func extractBoxed(text string) (string, bool) {
	var starts []int
	for i := 0; ; {
		j := strings.Index(text[i:], boxedOpen)
		if j < 0 {
			break
		}
		i += j + len(boxedOpen)
		starts = append(starts, i)
	}
	// When the group opened at s never closes, its depth stays positive
	// to the end of text, so a group opened before s that is still open
	// at s can never close either: scanning an earlier group can stop at
	// the start of the last one that failed. This keeps the search
	// linear without changing its result.
	limit := len(text)
	for k := len(starts) - 1; k >= 0; k-- {
		start := starts[k]
		depth := 1
		for i := start; i < limit; i++ {
			switch text[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth == 0 {
				return pystr.Strip(stripTextWrappers(pystr.Strip(text[start:i]))), true
			}
		}
		limit = start
	}
	return "", false
}

// stripTextWrappers repeatedly unwraps a value that is entirely
// \text{...}: it must start with \text{ and end with }, braces inside
// need not balance, and the inside is trimmed each time.
func stripTextWrappers(v string) string {
	for len(v) > len(textOpen) && strings.HasPrefix(v, textOpen) && strings.HasSuffix(v, "}") {
		v = pystr.Strip(v[len(textOpen) : len(v)-1])
	}
	return v
}

// extractFinalAnswer returns what follows the last answer label, trimmed,
// without one final '.', trimmed again, and without any trailing '.'.
//
// Upstream finds the labels with the Python pattern
//
//	(?i)(?:final\s+answer|answer)\s*[:：]\s*(.+)
//
// and takes the group of its last match. lastLabelValue reproduces that
// search by hand: Go's regexp engine gets the same matches but runs two
// orders of magnitude slower on long texts, as the pattern has no literal
// prefix.
func extractFinalAnswer(text string) (string, bool) {
	start, end, ok := lastLabelValue(text)
	if !ok {
		return "", false
	}
	raw := pystr.Strip(text[start:end])
	// Upstream splits at the first '.' followed only by whitespace up to
	// the end; in a trimmed value that can only be a '.' in last place.
	raw = strings.TrimSuffix(raw, ".")
	return strings.TrimRight(pystr.Strip(raw), "."), true
}

// lastLabelValue returns the bounds of the group of the last match of
// upstream's label pattern in text, matches being found left to right
// without overlap as Python's findall does.
//
// The "final\s+answer" alternative never changes a group or where a match
// ends (wherever it matches, "answer" matches the same text), so only the
// word answer is looked for. Python's case-insensitive matching accepts
// the ASCII letters of either case and U+017F (long s) for 's'.
func lastLabelValue(text string) (start, end int, ok bool) {
	for pos := 0; pos < len(text); {
		i := indexA(text, pos)
		if i < 0 {
			break
		}
		pos = i + 1
		after, isWord := matchAnswer(text, i)
		if !isWord {
			continue
		}
		s, e, isLabel := labelValue(text, after)
		if !isLabel {
			continue
		}
		start, end, ok = s, e, true
		pos = e
	}
	return start, end, ok
}

// indexA returns the index of the first 'a' or 'A' in text at or after
// from, or -1.
func indexA(text string, from int) int {
	for i := from; i < len(text); i++ {
		if text[i]|0x20 == 'a' {
			return i
		}
	}
	return -1
}

// longS is U+017F, which Python's case-insensitive 's' matches.
const longS = "\u017f"

// matchAnswer reports whether the word answer, in any case, starts at
// text[i], and where it ends.
func matchAnswer(text string, i int) (end int, ok bool) {
	for _, want := range []byte("answer") {
		switch {
		case i < len(text) && text[i]|0x20 == want:
			i++
		case want == 's' && strings.HasPrefix(text[i:], longS):
			i += len(longS)
		default:
			return 0, false
		}
	}
	return i, true
}

// labelValue matches \s*[:：]\s*(.+) at text[i:] the way a backtracking
// engine does and returns the bounds of the group. The second \s* is
// greedy and crosses line ends; the group then runs to the end of the
// line. When only whitespace follows the colon, \s* gives back its last
// character that is not a newline, and that character is the group.
func labelValue(text string, i int) (start, end int, ok bool) {
	i = skipPySpace(text, i)
	switch {
	case strings.HasPrefix(text[i:], ":"):
		i++
	case strings.HasPrefix(text[i:], "\uff1a"):
		i += len("\uff1a")
	default:
		return 0, 0, false
	}
	colonEnd := i
	i = skipPySpace(text, i)
	if i < len(text) {
		if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
			return i, i + nl, true
		}
		return i, len(text), true
	}
	for j := len(text); j > colonEnd; {
		r, size := utf8.DecodeLastRuneInString(text[colonEnd:j])
		j -= size
		if r != '\n' {
			return j, j + size, true
		}
	}
	return 0, 0, false
}

// skipPySpace returns the index of the first character at or after i
// that is not Python whitespace, or len(text).
func skipPySpace(text string, i int) int {
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !pystr.IsSpace(r) {
			break
		}
		i += size
	}
	return i
}

// extractLastLine returns the last line of text that is not blank,
// trimmed. Lines end where Python's str.splitlines ends them.
func extractLastLine(text string) (string, bool) {
	lines := pySplitLines(text)
	for i := len(lines) - 1; i >= 0; i-- {
		if line := pystr.Strip(lines[i]); line != "" {
			return line, true
		}
	}
	return "", false
}
