package telfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Number is a metric value as it appears in the file. It keeps the exact
// decimal text, so 64-bit integers survive a round trip without being forced
// through float64, and it can carry the non-finite values that JSON numbers
// cannot express.
//
// On the wire a Number is a plain JSON number, except NaN and the infinities,
// which are written as the strings "NaN", "+Inf" and "-Inf". The zero value
// (empty text) means 0.
type Number string

// Texts used for the non-finite float values, both in Number and wherever
// the format has to store a float inside an attribute.
const (
	textNaN    = "NaN"
	textPosInf = "+Inf"
	textNegInf = "-Inf"
)

// IntNumber returns the Number for an integer value.
func IntNumber(v int64) Number { return Number(strconv.FormatInt(v, 10)) }

// FloatNumber returns the Number for a float value, including NaN and ±Inf.
func FloatNumber(v float64) Number {
	switch {
	case math.IsNaN(v):
		return textNaN
	case math.IsInf(v, 1):
		return textPosInf
	case math.IsInf(v, -1):
		return textNegInf
	}
	return Number(strconv.FormatFloat(v, 'g', -1, 64))
}

// JSONFloat returns v unchanged when it is finite, and otherwise the string
// "NaN", "+Inf" or "-Inf", so that the result can always be JSON encoded.
// Writers use it for float attribute values.
func JSONFloat(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return string(FloatNumber(v))
	}
	return v
}

// Float64 returns the value as a float64. Text that is not a number yields
// NaN.
func (n Number) Float64() float64 {
	if n == "" {
		return 0
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return f
}

// Int64 returns the value as an int64 and reports whether it is an integer
// that fits.
func (n Number) Int64() (int64, bool) {
	if n == "" {
		return 0, true
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// String returns the number's text ("0" for the zero value).
func (n Number) String() string {
	if n == "" {
		return "0"
	}
	return string(n)
}

// MarshalJSON writes the number as a JSON number, or as a string for NaN and
// the infinities.
func (n Number) MarshalJSON() ([]byte, error) {
	switch n {
	case "":
		return []byte("0"), nil
	case textNaN, textPosInf, textNegInf:
		return []byte(`"` + string(n) + `"`), nil
	}
	if !isJSONNumber(string(n)) {
		return nil, fmt.Errorf("telfile: %q is not a number", string(n))
	}
	return []byte(n), nil
}

// UnmarshalJSON accepts a JSON number or one of the strings "NaN", "+Inf"
// and "-Inf".
func (n *Number) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case textNaN, textPosInf, textNegInf:
			*n = Number(s)
			return nil
		}
		return fmt.Errorf("telfile: number expected, got string %q", s)
	}
	if !isJSONNumber(string(b)) {
		return fmt.Errorf("telfile: number expected, got %s", b)
	}
	*n = Number(b)
	return nil
}

// isJSONNumber reports whether s is exactly one JSON number literal.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
