package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

// FuzzVerifyRequestRoundTrip checks that a /verify body that decodes and
// validates re-encodes, on one line and without a repeated key, to JSON
// that decodes and validates again and re-encodes to the same bytes; and
// that nothing panics, whatever the input.
func FuzzVerifyRequestRoundTrip(f *testing.F) {
	for _, seed := range []string{
		verifyJSON, benchVerifyJSON, rowJSON,
		`{"responses_create_params":{"input":"hi"},"response":` + minimalResponseJSON + `}`,
		`{"responses_create_params":{"input":[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"y"}]}],"tools":[],"temperature":null},"response":` + minimalResponseJSON + `,"reward":0,"x":null}`,
		`{"responses_create_params":{"input":"a","prompt_cache_key":"k"},"response":{}}`,
		`{"responses_create_params":null,"response":null}`,
		`[]`, `{`, `null`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(fuzzOnce)
}

// fuzzOnce is one run of FuzzVerifyRequestRoundTrip.
func fuzzOnce(t *testing.T, data []byte) {
	{
		var req VerifyRequest
		if json.Unmarshal(data, &req) != nil {
			return
		}
		err := req.Validate()
		_ = DecodeError(err, "body")
		once, merr := json.Marshal(req)
		if merr != nil {
			t.Fatalf("decoded value does not encode: %v", merr)
		}
		if err != nil {
			return
		}
		if bytes.ContainsAny(once, "\r\n") {
			t.Fatalf("re-encoding spans lines: %s", once)
		}
		// Raw values travel verbatim, repeated keys inside them included;
		// an input without repeated keys must not gain any.
		inputDups := dupKeys(data) != ""
		if k := dupKeys(once); k != "" && !inputDups {
			t.Fatalf("key %s twice in %s", k, once)
		}
		if where := lost(canon(t, data), canon(t, once), "$"); where != "" {
			t.Fatalf("re-encoding loses or changes %s\ninput: %s\nonce:  %s", where, data, once)
		}
		var again VerifyRequest
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatalf("re-encoding does not decode: %v\n%s", err, once)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("re-encoding does not validate: %v\n%s", err, once)
		}
		twice, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("re-encodings differ\nonce:  %s\ntwice: %s", once, twice)
		}
		resp := NewVerifyResponse(again, 1)
		out, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if k := dupKeys(out); k != "" && !inputDups {
			t.Fatalf("verify response has key %s twice: %s", k, out)
		}
	}
}

// lost returns the path of the first member or element of a (parsed
// JSON) that b lacks or holds with another value, or "". b may hold
// members a lacks: the encoders add the members upstream requires.
func lost(a, b any, path string) string {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			return path
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok {
				return path + "." + k
			}
			if where := lost(av, bv, path+"."+k); where != "" {
				return where
			}
		}
		return ""
	case []any:
		bl, ok := b.([]any)
		if !ok || len(bl) != len(a) {
			return path
		}
		for i := range a {
			if where := lost(a[i], bl[i], fmt.Sprintf("%s[%d]", path, i)); where != "" {
				return where
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a, b) && !laxSame(a, b) {
		return path
	}
	return ""
}

// laxSame reports whether the scalar b is what pydantic's lax mode (as
// upstream's models read a JSON body) makes of the scalar a: a boolean or a
// numeric string read as a number, a number or a word read as a boolean.
// Such a value is re-encoded as the number or boolean it was read as, as
// upstream dumps it.
func laxSame(a, b any) bool {
	switch b := b.(type) {
	case json.Number:
		switch a := a.(type) {
		case bool:
			return (a && b == "1") || (!a && b == "0")
		case string:
			r, ok := new(big.Rat).SetString(strings.TrimSpace(a))
			return ok && json.Number(r.RatString()) == b
		}
	case bool:
		switch a := a.(type) {
		case json.Number:
			return (b && a == "1") || (!b && a == "0")
		case string:
			switch strings.ToLower(a) {
			case "1", "on", "t", "true", "y", "yes":
				return b
			case "0", "off", "f", "false", "n", "no":
				return !b
			}
		}
	}
	return false
}
