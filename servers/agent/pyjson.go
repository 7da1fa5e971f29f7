package agent

import (
	"fmt"
	"strings"
)

// pythonJSONError returns the repr of the json.JSONDecodeError that
// Python's json.loads (CPython 3.13, the interpreter nemo-gym 0.7.0
// requires) raises on s, such as
// JSONDecodeError('Expecting value: line 1 column 1 (char 0)'), or "" when
// Python's decoder accepts s. Upstream's agent writes that repr into the
// output of a function call whose arguments do not parse.
//
// The scan follows CPython's decoder: the same grammar (NaN, Infinity and
// -Infinity accepted, a byte order mark refused), the same error for each
// way of failing, and the position in code points. It is called only on
// arguments encoding/json refused, so it works on runes. Two failures of
// Python's that are not JSONDecodeError, and that upstream answers with a
// 500, are not modelled: nesting past the recursion limit and integers
// past 4300 digits.
func pythonJSONError(s string) string {
	r := []rune(s)
	msg, pos, ok := pyLoads(r)
	if ok {
		return ""
	}
	head := r[:min(pos, len(r))]
	line, col := 1, pos+1
	for i, c := range head {
		if c == '\n' {
			line, col = line+1, pos-i
		}
	}
	return "JSONDecodeError(" + pyRepr(fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, pos)) + ")"
}

// pyRepr is Python's repr of a string of printable ASCII: single quotes
// unless it holds a single quote and no double one, backslashes and the
// quote escaped.
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	return q + strings.ReplaceAll(s, q, `\`+q) + q
}

// pyScanError is a failure of Python's scan: a JSONDecodeError (msg and
// pos), or, with stop set, the StopIteration its scanner raises where no
// value starts, which becomes "Expecting value" at pos.
type pyScanError struct {
	msg  string
	pos  int
	stop bool
}

// pyLoads scans r as json.loads does, returning the error's message and
// position, or ok.
func pyLoads(r []rune) (msg string, pos int, ok bool) {
	if len(r) > 0 && r[0] == '\ufeff' {
		return "Unexpected UTF-8 BOM (decode using utf-8-sig)", 0, false
	}
	end, err := pyScanOnce(r, pySkip(r, 0))
	if err != nil {
		if err.stop {
			return "Expecting value", err.pos, false
		}
		return err.msg, err.pos, false
	}
	if end = pySkip(r, end); end != len(r) {
		return "Extra data", end, false
	}
	return "", 0, true
}

// pySkip returns the first index at or after i that is not JSON white
// space.
func pySkip(r []rune, i int) int {
	for i < len(r) && (r[i] == ' ' || r[i] == '\t' || r[i] == '\n' || r[i] == '\r') {
		i++
	}
	return i
}

func pyFail(msg string, pos int) *pyScanError { return &pyScanError{msg: msg, pos: pos} }

func pyStop(pos int) *pyScanError { return &pyScanError{pos: pos, stop: true} }

// pyLiteral reports whether word follows r[i] (the literal's first
// letter, already matched), with the bounds test the scanner makes.
func pyLiteral(r []rune, i int, word string) bool {
	rest := []rune(word)
	if i+len(rest) >= len(r) {
		return false
	}
	for j, c := range rest {
		if r[i+1+j] != c {
			return false
		}
	}
	return true
}

// pyScanOnce scans the value at i and returns the index after it.
func pyScanOnce(r []rune, i int) (int, *pyScanError) {
	if i >= len(r) {
		return 0, pyStop(i)
	}
	switch r[i] {
	case '"':
		return pyScanString(r, i+1)
	case '{':
		return pyScanObject(r, i+1)
	case '[':
		return pyScanArray(r, i+1)
	case 'n':
		if pyLiteral(r, i, "ull") {
			return i + 4, nil
		}
	case 't':
		if pyLiteral(r, i, "rue") {
			return i + 4, nil
		}
	case 'f':
		if pyLiteral(r, i, "alse") {
			return i + 5, nil
		}
	case 'N':
		if pyLiteral(r, i, "aN") {
			return i + 3, nil
		}
	case 'I':
		if pyLiteral(r, i, "nfinity") {
			return i + 8, nil
		}
	case '-':
		if pyLiteral(r, i, "Infinity") {
			return i + 9, nil
		}
	}
	return pyScanNumber(r, i)
}

func pyDigit(c rune) bool { return c >= '0' && c <= '9' }

// pyScanNumber matches the number at start.
func pyScanNumber(r []rune, start int) (int, *pyScanError) {
	last, i := len(r)-1, start
	if r[i] == '-' {
		if i++; i > last {
			return 0, pyStop(start)
		}
	}
	switch {
	case r[i] >= '1' && r[i] <= '9':
		for i++; i <= last && pyDigit(r[i]); i++ {
		}
	case r[i] == '0':
		i++
	default:
		return 0, pyStop(start)
	}
	if i < last && r[i] == '.' && pyDigit(r[i+1]) {
		for i += 2; i <= last && pyDigit(r[i]); i++ {
		}
	}
	if i < last && (r[i] == 'e' || r[i] == 'E') {
		e := i
		i++
		if i < last && (r[i] == '-' || r[i] == '+') {
			i++
		}
		for ; i <= last && pyDigit(r[i]); i++ {
		}
		if !pyDigit(r[i-1]) {
			i = e
		}
	}
	return i, nil
}

// pyHex decodes the four hex digits at r[i:i+4], reporting success.
func pyHex(r []rune, i int) (rune, bool) {
	var v rune
	for _, c := range r[i : i+4] {
		v <<= 4
		switch {
		case pyDigit(c):
			v |= c - '0'
		case c >= 'a' && c <= 'f':
			v |= c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v |= c - 'A' + 10
		default:
			return 0, false
		}
	}
	return v, true
}

// pyScanString scans the string whose opening quote is at end-1.
func pyScanString(r []rune, end int) (int, *pyScanError) {
	begin := end - 1
	for {
		next := end
		for ; next < len(r) && r[next] != '"' && r[next] != '\\'; next++ {
			if r[next] <= 0x1f {
				return 0, pyFail("Invalid control character at", next)
			}
		}
		if next >= len(r) {
			return 0, pyFail("Unterminated string starting at", begin)
		}
		if r[next] == '"' {
			return next + 1, nil
		}
		if next++; next == len(r) {
			return 0, pyFail("Unterminated string starting at", begin)
		}
		if c := r[next]; c != 'u' {
			if !strings.ContainsRune(`"\/bfnrt`, c) {
				return 0, pyFail(`Invalid \escape`, next-1)
			}
			end = next + 1
			continue
		}
		next++
		if end = next + 4; end >= len(r) {
			return 0, pyFail(`Invalid \uXXXX escape`, next-1)
		}
		c, ok := pyHex(r, next)
		if !ok {
			return 0, pyFail(`Invalid \uXXXX escape`, end-5)
		}
		if c >= 0xd800 && c <= 0xdbff && end+6 < len(r) && r[end] == '\\' && r[end+1] == 'u' {
			low, ok := pyHex(r, end+2)
			if !ok {
				return 0, pyFail(`Invalid \uXXXX escape`, end+1)
			}
			if low >= 0xdc00 && low <= 0xdfff { // the pair joins; else the escape is scanned next
				end += 6
			}
		}
	}
}

// pyScanObject scans the object whose opening brace is at i-1.
func pyScanObject(r []rune, i int) (int, *pyScanError) {
	last := len(r) - 1
	if i = pySkip(r, i); i <= last && r[i] == '}' {
		return i + 1, nil
	}
	for {
		if i > last || r[i] != '"' {
			return 0, pyFail("Expecting property name enclosed in double quotes", i)
		}
		var err *pyScanError
		if i, err = pyScanString(r, i+1); err != nil {
			return 0, err
		}
		if i = pySkip(r, i); i > last || r[i] != ':' {
			return 0, pyFail("Expecting ':' delimiter", i)
		}
		if i, err = pyScanOnce(r, pySkip(r, i+1)); err != nil {
			return 0, err
		}
		if i = pySkip(r, i); i <= last && r[i] == '}' {
			return i + 1, nil
		}
		if i > last || r[i] != ',' {
			return 0, pyFail("Expecting ',' delimiter", i)
		}
		comma := i
		if i = pySkip(r, i+1); i <= last && r[i] == '}' {
			return 0, pyFail("Illegal trailing comma before end of object", comma)
		}
	}
}

// pyScanArray scans the array whose opening bracket is at i-1.
func pyScanArray(r []rune, i int) (int, *pyScanError) {
	last := len(r) - 1
	if i = pySkip(r, i); i <= last && r[i] == ']' {
		return i + 1, nil
	}
	for {
		var err *pyScanError
		if i, err = pyScanOnce(r, i); err != nil {
			return 0, err
		}
		if i = pySkip(r, i); i <= last && r[i] == ']' {
			return i + 1, nil
		}
		if i > last || r[i] != ',' {
			return 0, pyFail("Expecting ',' delimiter", i)
		}
		comma := i
		if i = pySkip(r, i+1); i <= last && r[i] == ']' {
			return 0, pyFail("Illegal trailing comma before end of array", comma)
		}
	}
}
