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
		{"reward an object", `{` + echo + `,"reward":{"value":1}}`},
		{"reward a string that is not a number", `{` + echo + `,"reward":"high"}`},
		{"last of repeated rewards not a number", `{` + echo + `,"reward":1,"reward":"high"}`},
		{"reward out of range", `{` + echo + `,"reward":1e400}`},
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

// TestLaxRewardsPassedOn: a reward pydantic's lax float reads (a numeric
// string, a boolean) is a verify answer upstream's agent takes
// (protocol.CheckVerifyResponse); the Go agent passes it on as the
// verifier wrote it, where upstream's answers its float (1.0).
func TestLaxRewardsPassedOn(t *testing.T) {
	echo := `"responses_create_params":{"input":"hi"},"response":` + response("r", message("m", "x"))
	for _, reward := range []string{`"1"`, `true`, `" 0.5 "`} {
		f := newFixture(t, script(response("r1", message("m", "x"))), resourcesOptions{verifyBody: `{` + echo + `,"reward":` + reward + `}`}, agent.Config{})
		a := post(t, f.agentURL+"/run", minimalRow)
		if a.status != http.StatusOK || !strings.Contains(string(a.body), `"reward":`+reward) {
			t.Errorf("reward %s: %d %s, want 200 with the reward as it came", reward, a.status, a.body)
		}
	}
}

// TestVerifyAnswerPassedOnAsItCame: /run answers with the verify answer's
// bytes, so members the agent knows nothing of, nulls, number spellings,
// escapes, white space, member order and repeated members reach the
// caller exactly as the resources server wrote them. Upstream's agent
// answers its verify-response model's dump, so two edits are made:
// mask_sample, failure_kind and failure_reason are added with upstream's
// defaults when the answer lacks them, and an _ng_rollout_id the
// verifier echoed is left out.
func TestVerifyAnswerPassedOnAsItCame(t *testing.T) {
	ok := script(response("r1", message("m", "x")))
	verify := `{"responses_create_params":{"input":"hi","metadata":null},"zeta":null,` +
		`"response":` + withMember(response("r", message("m", "x")), "usage", "null") + `,` +
		`"reward":1.0,"extracted":{"a":[1,2.50,null],"b":"\u00e9\u2028<>"},"reward_detail":null,` +
		`"_ng_task_index":"seven","agent_ref":{"type":"x","name":"y","extra":true},"dup":1,"dup":2,` +
		`"big":12345678901234567890,"exp":1E-7}`
	const defaults = `,"mask_sample":false,"failure_kind":null,"failure_reason":null}`
	withDefaults := func(obj string) string { return strings.TrimSuffix(obj, "}") + defaults }
	spaced := strings.ReplaceAll(verify, `,"`, ",\n  \"")
	// A verifier that sets the three members itself, in its own spelling.
	own := strings.Replace(verify, `"zeta":null,`, `"zeta":null,"failure_reason":"judge down" , "mask_sample":true,"failure_kind":null,`, 1)
	for _, c := range []struct{ name, body, want string }{
		{"compact", verify, withDefaults(verify) + "\n"},
		{"with a trailing newline", verify + "\n", withDefaults(verify) + "\n"},
		{"spaced", " \n" + spaced + "\n\n", withDefaults(spaced) + "\n"},
		{"members of its own", own, own + "\n"},
		{"an echoed rollout id", strings.Replace(own, `"zeta":null,`, `"zeta":null, "_ng_rollout_id" : "r-1",`, 1), own + "\n"},
		{"an echoed rollout id first", `{"_ng_rollout_id":"r-1",` + strings.TrimPrefix(own, "{"), own + "\n"},
		{"an echoed rollout id last", strings.TrimSuffix(own, "}") + `,"_ng_rollout_id":null}`, own + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, ok, resourcesOptions{verifyBody: c.body}, agent.Config{})
			a := post(t, f.agentURL+"/run", minimalRow)
			if a.status != http.StatusOK {
				t.Fatalf("status %d (%s), want 200", a.status, a.body)
			}
			if string(a.body) != c.want {
				t.Errorf("/run answer\n%q\nwant\n%q", a.body, c.want)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
