package telemetry

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxModelNameBytes bounds a model name recorded on spans and metrics
// (gen_ai.request.model, gen_ai.response.model). Real names are a few
// dozen bytes ("nvidia/llama-3.3-nemotron-super-49b-v1"); the bound is for
// the value an upstream's answer puts in its model field, which nothing
// else checks.
const MaxModelNameBytes = 256

// ModelName returns s fit to record as a model name: control characters
// and invalid UTF-8 replaced by U+FFFD, and cut at a character boundary to
// at most MaxModelNameBytes. A clean name is returned as it is, without
// allocating.
func ModelName(s string) string {
	if len(s) <= MaxModelNameBytes && cleanName(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), MaxModelNameBytes))
	// Ranging over a string yields utf8.RuneError for each invalid byte,
	// so those come out replaced as the control characters are.
	for _, r := range s {
		if unicode.IsControl(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > MaxModelNameBytes {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

func cleanName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			if c < 0x80 {
				return false
			}
			// Beyond ASCII: check properly.
			for _, r := range s[i:] {
				if r == utf8.RuneError || unicode.IsControl(r) {
					return false
				}
			}
			return true
		}
	}
	return true
}
