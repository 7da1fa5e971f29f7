package stringmatch

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"bytes"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reproduces the few pieces of Python's str and float behaviour
// the grader depends on, where Go's standard library behaves differently.

// pyIsLineBreak reports whether Python's str.splitlines ends a line at r.
func pyIsLineBreak(r rune) bool {
	switch r {
	case '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// pySplitLines is Python's str.splitlines() without keepends: "\r\n" is
// one break, and a break at the very end does not start another line.
func pySplitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !pyIsLineBreak(r) {
			i += size
			continue
		}
		lines = append(lines, s[start:i])
		i += size
		if r == '\r' && i < len(s) && s[i] == '\n' {
			i++
		}
		start = i
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// decimalValue is the digit value of a character of category Nd, as
// Python's unicodedata.decimal gives it. Unicode lays decimal digits out
// in runs of ten starting at zero, so the value is the distance from the
// start of the run modulo ten.
func decimalValue(r rune) (byte, bool) {
	if !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	z := r
	for unicode.Is(unicode.Nd, z-1) {
		z--
	}
	return byte((r - z) % 10), true
}

// isPyASCIISpace is the ASCII whitespace test of Python's float parser.
func isPyASCIISpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// pyFloat is Python's float() applied to a str: surrounding whitespace is
// allowed, any Unicode decimal digit counts as a digit, single
// underscores may separate digits, and "inf", "infinity" and "nan" are
// accepted in any case with an optional sign. Out-of-range values become
// infinities or zero rather than errors. ok is false where Python raises
// ValueError.
func pyFloat(s string) (f float64, ok bool) {
	buf := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r < 127:
			buf = append(buf, byte(r))
		case pystr.IsSpace(r):
			buf = append(buf, ' ')
		default:
			d, isDigit := decimalValue(r)
			if !isDigit {
				return 0, false
			}
			buf = append(buf, '0'+d)
		}
	}
	if bytes.IndexByte(buf, 0) >= 0 {
		return 0, false
	}
	if bytes.IndexByte(buf, '_') >= 0 {
		out := buf[:0:0]
		var prev byte
		for _, c := range buf {
			if c == '_' {
				if !isASCIIDigit(prev) {
					return 0, false
				}
			} else {
				if prev == '_' && !isASCIIDigit(c) {
					return 0, false
				}
				out = append(out, c)
			}
			prev = c
		}
		if prev == '_' {
			return 0, false
		}
		buf = out
	}
	lo, hi := 0, len(buf)
	for lo < hi && isPyASCIISpace(buf[lo]) {
		lo++
	}
	for hi > lo && isPyASCIISpace(buf[hi-1]) {
		hi--
	}
	return parseFloatLiteral(string(buf[lo:hi]))
}

func isASCIIDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseFloatLiteral parses the grammar of Python's float literals without
// underscores: [sign] (digits [. [digits]] | . digits) [e [sign] digits],
// or [sign] inf|infinity|nan in any case.
func parseFloatLiteral(s string) (float64, bool) {
	body := s
	neg := false
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	i, digits := 0, 0
	for i < len(body) && isASCIIDigit(body[i]) {
		i++
		digits++
	}
	if i < len(body) && body[i] == '.' {
		i++
		for i < len(body) && isASCIIDigit(body[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(body) && (body[i] == 'e' || body[i] == 'E') {
		i++
		if i < len(body) && (body[i] == '+' || body[i] == '-') {
			i++
		}
		expDigits := 0
		for i < len(body) && isASCIIDigit(body[i]) {
			i++
			expDigits++
		}
		if expDigits == 0 {
			return 0, false
		}
	}
	if i != len(body) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, isNum := err.(*strconv.NumError); !isNum || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return f, true
}

// pyFloatRepr is Python's repr() (and str()) of a float: the shortest
// digits that read back to f, in positional notation with at least one
// fractional digit when the decimal exponent is in [-4, 16), else in
// scientific notation with a signed exponent of at least two digits.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expPart, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expPart)
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		out := sign + digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		expSign := "+"
		if exp < 0 {
			expSign, exp = "-", -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return out + "e" + expSign + es
	}
	point := exp + 1
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point < len(digits):
		return sign + digits[:point] + "." + digits[point:]
	default:
		return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
	}
}

// pyMax is Python's max(a, b) on floats: b only when b > a, so a NaN in
// second place loses.
func pyMax(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

// pyCollapseSpace is Python's " ".join(s.split()).
func pyCollapseSpace(s string) string {
	return strings.Join(strings.FieldsFunc(s, pystr.IsSpace), " ")
}
