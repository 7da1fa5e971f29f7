package protocol

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestCheckVerifyResponse: the shallow check of a verify answer refuses
// what the typed decode and Validate refuse, for the answer's kind, the
// reward and the presence and kind of the echoed members, and accepts
// what they accept.
func TestCheckVerifyResponse(t *testing.T) {
	const (
		params = `"responses_create_params":{"input":"hi"}`
		resp   = `"response":{"id":"r","object":"response","created_at":1,"model":"m","output":[],"parallel_tool_calls":true,"tool_choice":"auto","tools":[]}`
	)
	for _, c := range []struct {
		body string
		ok   bool
		loc  string // the refusal's location
	}{
		{`{` + params + `,` + resp + `,"reward":1}`, true, ""},
		{`{"reward":-0.5e-3,` + resp + `,` + params + `,"extra":null,"x":{"reward":"no"}}`, true, ""},
		{` {` + params + ` , ` + resp + ` , "reward" : 12345678901234567890 } `, true, ""},
		{`{` + params + `,` + resp + `,"rew\u0061rd":1}`, true, ""},
		{`{` + params + `,` + resp + `,"reward":"1","reward":1}`, true, ""},
		{`{` + params + `,` + resp + `}`, false, "reward"},
		{`{` + params + `,` + resp + `,"reward":null}`, false, "reward"},
		// pydantic's lax float takes a numeric string and a boolean.
		{`{` + params + `,` + resp + `,"reward":"1"}`, true, ""},
		{`{` + params + `,` + resp + `,"reward":false}`, true, ""},
		{`{` + params + `,` + resp + `,"reward":"one"}`, false, "reward"},
		{`{` + params + `,` + resp + `,"reward":[1]}`, false, "reward"},
		{`{` + params + `,` + resp + `,"reward":1e400}`, false, "reward"},
		{`{` + params + `,` + resp + `,"reward":1,"reward":null}`, false, "reward"},
		{`{` + params + `,` + resp + `,"Reward":1}`, false, "reward"},
		{`{` + resp + `,"reward":1}`, false, KeyParams},
		{`{"responses_create_params":null,` + resp + `,"reward":1}`, false, KeyParams},
		{`{"responses_create_params":[],` + resp + `,"reward":1}`, false, KeyParams},
		{`{` + params + `,"reward":1}`, false, KeyResponse},
		{`{` + params + `,"response":null,"reward":1}`, false, KeyResponse},
		{`{` + params + `,"response":"r","reward":1}`, false, KeyResponse},
		{`[]`, false, ""},
		{`"reward"`, false, ""},
		{`1`, false, ""},
		{`null`, false, ""},
	} {
		err := CheckVerifyResponse([]byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: CheckVerifyResponse %v, want ok %v", c.body, err, c.ok)
			continue
		}
		var typed VerifyResponse
		typedErr := json.Unmarshal([]byte(c.body), &typed)
		if typedErr == nil {
			typedErr = typed.Validate()
		}
		if (typedErr == nil) != c.ok {
			t.Errorf("%s: decode and Validate %v, want ok %v: the two checks disagree", c.body, typedErr, c.ok)
		}
		if c.ok {
			continue
		}
		var v *ValidationError
		if !errors.As(err, &v) || len(v.Detail) != 1 {
			t.Errorf("%s: %v, want one *ValidationError entry", c.body, err)
			continue
		}
		if got := LocString(v.Detail[0].Loc); got != c.loc {
			t.Errorf("%s: refused at %q, want %q", c.body, got, c.loc)
		}
	}
}

// TestCheckVerifyResponseIsShallow: the echoed parameters and episode are
// checked for kind only; Validate checks them against their schemas.
func TestCheckVerifyResponseIsShallow(t *testing.T) {
	body := []byte(`{"responses_create_params":{"input":5},"response":{"output":"text"},"reward":1}`)
	if err := CheckVerifyResponse(body); err != nil {
		t.Errorf("CheckVerifyResponse: %v, want the echo taken as it came", err)
	}
	var typed VerifyResponse
	if json.Unmarshal(body, &typed) == nil && typed.Validate() == nil {
		t.Errorf("decode and Validate took an invalid echo")
	}
}
