package agent_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/servers/agent"
)

// TestInvalidVerifyAnswerIs500: a 2xx verify answer that is not a verify
// result fails the rollout with a 500, as the typed decode and Validate
// failed it before the answer was passed on raw.
func TestInvalidVerifyAnswerIs500(t *testing.T) {
	ok := script(response("r1", message("m", "x")))
	episode := response("r", message("m", "x"))
	echo := `"responses_create_params":{"input":"hi"},"response":` + episode
	for _, c := range []struct{ name, body string }{
		{"no reward", `{` + echo + `}`},
		{"reward null", `{` + echo + `,"reward":null}`},
		{"reward a string", `{` + echo + `,"reward":"1"}`},
		{"reward a bool", `{` + echo + `,"reward":true}`},
		{"reward an object", `{` + echo + `,"reward":{"value":1}}`},
		{"reward out of range", `{` + echo + `,"reward":1e400}`},
		{"last of repeated rewards a string", `{` + echo + `,"reward":1,"reward":"1"}`},
		{"reward only in a nested object", `{"responses_create_params":{"input":"hi","reward":1},"response":` + episode + `}`},
		{"no response", `{"responses_create_params":{"input":"hi"},"reward":1}`},
		{"response null", `{"responses_create_params":{"input":"hi"},"response":null,"reward":1}`},
		{"response a list", `{"responses_create_params":{"input":"hi"},"response":[],"reward":1}`},
		{"no parameters", `{"response":` + episode + `,"reward":1}`},
		{"parameters a string", `{"responses_create_params":"hi","response":` + episode + `,"reward":1}`},
		{"not an object", `[{` + echo + `,"reward":1}]`},
		{"a number", `1`},
		{"a string", `"reward"`},
		{"null", `null`},
		{"JSON garbage", `{` + echo + `,"reward":1`},
		{"not JSON", `reward: 1`},
		{"only whitespace", ` `},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, ok, resourcesOptions{verifyBody: c.body}, agent.Config{})
			a := post(t, f.agentURL+"/run", minimalRow)
			if a.status != http.StatusInternalServerError {
				t.Fatalf("status %d (%s), want 500", a.status, a.body)
			}
			servertest.CheckErrorBody(t, a.status, a.body)
			if !strings.Contains(string(a.body), "verify") {
				t.Errorf("500 body %s does not say the verify call failed", a.body)
			}
		})
	}
}

// TestVerifyAnswerPassedOnAsItCame: /run answers with the verify answer's
// bytes, so members the agent knows nothing of, nulls, number spellings,
// escapes, member order and repeated members reach the caller exactly as
// the resources server wrote them.
func TestVerifyAnswerPassedOnAsItCame(t *testing.T) {
	ok := script(response("r1", message("m", "x")))
	verify := `{"responses_create_params":{"input":"hi","metadata":null},"zeta":null,` +
		`"response":` + withMember(response("r", message("m", "x")), "usage", "null") + `,` +
		`"reward":1.0,"extracted":{"a":[1,2.50,null],"b":"\u00e9\u2028<>"},"reward_detail":null,` +
		`"_ng_task_index":"seven","agent_ref":{"type":"x","name":"y","extra":true},"dup":1,"dup":2,` +
		`"big":12345678901234567890,"exp":1E-7}`
	for _, c := range []struct{ name, body, want string }{
		{"compact", verify, verify + "\n"},
		{"with a trailing newline", verify + "\n", verify + "\n"},
		{"spaced", " \n" + strings.ReplaceAll(verify, `,"`, ",\n  \"") + "\n\n", strings.ReplaceAll(verify, `,"`, ",\n  \"") + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, ok, resourcesOptions{verifyBody: c.body}, agent.Config{})
			a := post(t, f.agentURL+"/run", minimalRow)
			if a.status != http.StatusOK {
				t.Fatalf("status %d (%s), want 200", a.status, a.body)
			}
			if string(a.body) != c.want {
				t.Errorf("/run answer\n%q\nwant the verify answer as it came\n%q", a.body, c.want)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
