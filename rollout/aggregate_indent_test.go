package rollout

import (
	"bytes"
	"encoding/json"
	"testing"
)

// indentCompact writes what json.Indent writes for compact JSON, and
// declines anything else.
func TestIndentCompactAsJSONIndent(t *testing.T) {
	for _, v := range []string{
		`{}`, `[]`, `1`, `"a"`, `null`,
		`{"a":1,"b":[1,2,{"c":[]}],"d":{},"e":"x, y: {z} [w]","f":"q\"]},:","g":[[]],"h":-1.5e-7}`,
		`{"_ng_task_index":3,"mean/reward":0.5,"sample":{"agent_ref":{"name":"agent"}},"rollout_infos":[{"rollout_id":"3:0","reward":1.0}]}`,
		`["\\",{"\\\"":"\u00e9<>&"}]`,
	} {
		var want, got bytes.Buffer
		if err := json.Indent(&want, []byte(v), listPrefix, fileIndent); err != nil {
			t.Fatal(err)
		}
		if !indentCompact(&got, []byte(v), listPrefix) {
			t.Fatalf("indentCompact(%s) declined compact JSON", v)
		}
		if got.String() != want.String() {
			t.Errorf("indentCompact(%s) =\n%s\nwant\n%s", v, got.String(), want.String())
		}
	}
	for _, v := range []string{`{"a": 1}`, "[1,\n2]", `{"a":"b" }`} {
		var got bytes.Buffer
		if indentCompact(&got, []byte(v), listPrefix) || got.Len() > 0 {
			t.Errorf("indentCompact(%q) took JSON that is not compact", v)
		}
	}
}
