package agent_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gymlens/gymlens/servers/agent"
)

// FuzzUpstreamAnswer: for any JSON object, the /run answer made of it is
// one JSON object whose members, read as a decoder reads them (the last
// of a repeated name counting), are the object's without _ng_rollout_id,
// plus mask_sample false, failure_kind null and failure_reason null where
// the object lacked them; an object that needs no edit comes back as it
// was, byte for byte.
func FuzzUpstreamAnswer(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"reward":1}`, ` { "reward" : 1 , "mask_sample" : true } `,
		`{"_ng_rollout_id":"a","reward":1,"_ng_rollout_id":null}`,
		`{"mask\u005fsample":"x","failure_kind":1,"failure_reason":[],"reward":{"_ng_rollout_id":1}}`,
		`{"a":"\"}\\","b":[{"c":"]"}],"_ng_rollout_id":{"x":"}"},"d":-1.5e3,"e":true,"f":null}`,
		"{\"k\":\"\xff\",\"\\u005fng_rollout_id\":2}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in map[string]json.RawMessage
		if json.Unmarshal(b, &in) != nil || in == nil {
			t.Skip("not a JSON object")
		}
		// The client's decoder hands the answer over without the white
		// space around it, and the agent ends it with a newline.
		answer := append(bytes.TrimSpace(bytes.Clone(b)), '\n')
		out := agent.UpstreamAnswer(bytes.Clone(answer))
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q gave %q, not JSON: %v", b, out, err)
		}
		want := map[string]json.RawMessage{"mask_sample": json.RawMessage("false"),
			"failure_kind": json.RawMessage("null"), "failure_reason": json.RawMessage("null")}
		edit := false
		for k := range want {
			_, has := in[k]
			edit = edit || !has
		}
		for k, v := range in {
			if k == "_ng_rollout_id" {
				edit = true
				continue
			}
			want[k] = v
		}
		if len(got) != len(want) {
			t.Fatalf("%q gave %q: %d members, want %d", b, out, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(compact(t, got[k]), compact(t, v)) {
				t.Errorf("%q gave %q: %q is %s, want %s", b, out, k, got[k], v)
			}
		}
		if !edit && !bytes.Equal(out, answer) {
			t.Errorf("%q needed no edit but gave %q", b, out)
		}
	})
}

func compact(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return b.Bytes()
}
