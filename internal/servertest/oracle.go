package servertest

import (
	"bytes"
	"encoding/json"
	"math/big"
	"net/http"
	"regexp"
	"strings"
)

// scorableRE is the number grammar of the arithmetic verifier, written as a
// regular expression independently of its hand-written scanner: a sign,
// digits (or groups of three after one to three digits), an optional
// fraction, at least one digit.
var scorableRE = regexp.MustCompile(`^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?$`)

// Scorable is the fuzz tests' oracle for whether the arithmetic verifier
// can score against an expected answer: a number in its grammar, at most
// 4096 characters long.
func Scorable(expected string) bool {
	s := strings.TrimSpace(expected)
	return len(s) <= 4096 && strings.ContainsAny(s, "0123456789") && scorableRE.MatchString(s)
}

// SameNumber compares two numbers as arithmetic.LastNumber writes them,
// exactly.
func SameNumber(a, b string) bool {
	x, okX := new(big.Rat).SetString(a)
	y, okY := new(big.Rat).SetString(b)
	return okX && okY && x.Cmp(y) == 0
}

// ExpectDecode is the fuzz tests' oracle for how the runtime's typed
// handlers take a request body under a body limit of limit bytes: 400 or
// 413 past the limit, 400 for anything but one JSON object of the right
// shape that passes Validate (trailing data of any kind included), else
// 200 as far as decoding goes. req is what the body decoded to.
func ExpectDecode[Req any, P interface {
	*Req
	Validate() error
}](body []byte, limit int) (req Req, want []int) {
	if len(body) > limit {
		return req, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, []int{http.StatusBadRequest}
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return req, []int{http.StatusBadRequest}
	}
	if P(&req).Validate() != nil {
		return req, []int{http.StatusBadRequest}
	}
	return req, []int{http.StatusOK}
}
