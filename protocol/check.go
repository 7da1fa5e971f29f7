package protocol

import (
	"bytes"
	"encoding/json"
)

// CheckVerifyResponse checks a verify answer without decoding it, for a
// caller that passes the answer on as it came (the agent answers /run with
// the resources server's /verify answer). b must be one valid JSON value,
// as a json.Decoder hands it to an UnmarshalJSON method; the check is one
// pass over its top-level members, each value skipped, not read.
//
// It refuses, as VerifyResponse.Validate does for a decoded answer, a
// value that is not an object, a reward that is missing, null or not a
// number as pydantic's float reads one (a number, a boolean or a numeric
// string; one a float64 cannot hold is refused), and a
// responses_create_params or response that is missing or null; those two
// must also be objects. Unlike Validate it does not check the echoed
// parameters and episode against their schemas: they are what the caller
// sent to /verify. A repeated member counts by its last value, as a
// decoder reads it. The error is a *ValidationError whose locations are
// relative to the answer.
func CheckVerifyResponse(b []byte) error {
	var v validator
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		v.add(ErrModelType, "Input should be a valid dictionary or object to extract fields from", json.RawMessage(bytes.TrimSpace(b)))
		return v.err()
	}
	var reward, params, response []byte
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := valueEnd(b, i)
		key := b[i:end]
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // past ':'
		end = valueEnd(b, i)
		switch {
		case keyIs(key, KeyReward):
			reward = b[i:end]
		case keyIs(key, KeyParams):
			params = b[i:end]
		case keyIs(key, KeyResponse):
			response = b[i:end]
		}
		i = skipSpace(b, end)
	}
	checkObjectMember(&v, params, KeyParams)
	checkObjectMember(&v, response, KeyResponse)
	switch {
	case reward == nil:
		v.missing(nil, KeyReward)
	case !isNumber(reward):
		v.add(ErrFloat, "Input should be a valid number", json.RawMessage(reward), KeyReward)
	}
	return v.err()
}

// checkObjectMember checks a required object member of a verify answer
// (raw nil when it is missing).
func checkObjectMember(v *validator, raw []byte, key string) {
	switch {
	case raw == nil:
		v.missing(nil, key)
	case raw[0] != '{':
		v.add(ErrModelType, "Input should be a valid dictionary or object to extract fields from", json.RawMessage(raw), key)
	}
}

// keyIs reports whether the JSON string raw (a member name, valid JSON)
// is key; only a name with escapes is decoded.
func keyIs(raw []byte, key string) bool {
	if len(raw) < 2 {
		return false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1:len(raw)-1]) == key
	}
	s, err := decodeString(raw)
	return err == nil && s == key
}

// isNumber reports whether raw (valid JSON) is a reward VerifyResponse
// decodes: a finite number as pydantic's lax float reads one.
func isNumber(raw []byte) bool {
	var f laxFloat64
	return f.decodeRaw(raw) == nil && !isNull(raw)
}
