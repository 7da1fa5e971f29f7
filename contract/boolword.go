package contract

import "strings"

// BoolWord reads a setting's text as a boolean, the one set of words
// gymlens's own settings take (environment variables, YAML strings,
// recorded configs): 1, true, yes, on and 0, false, no, off, in any case,
// spaces around ignored. ok is false for anything else. NeMo Gym's
// request bodies are read by pydantic's lax rules instead, which take
// more words (protocol.LaxBoolWord).
func BoolWord(s string) (v, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}
