package servertest

import (
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
