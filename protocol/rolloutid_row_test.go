package protocol

import (
	"encoding/json"
	"testing"
)

// RolloutIDOfRow, reading only the bookkeeping members, names the rollout
// the whole row's ResolveRolloutID names, for every shape of them.
func TestRolloutIDOfRowAgreesWithTheDecodedRow(t *testing.T) {
	params := `"responses_create_params":{"input":"q","temperature":0.5},"expected_answer":"x"`
	for _, bk := range []string{
		``, `"_ng_task_index":3`, `"_ng_task_index":3,"_ng_rollout_index":1`,
		`"_ng_task_index":3,"_ng_rollout_index":1,"_ng_attempt_index":2`,
		`"_ng_task_index":3,"_ng_rollout_index":1,"_ng_attempt_index":0`,
		`"_ng_rollout_id":"abc.1"`, `"_ng_rollout_id":"abc","_ng_attempt_index":1`,
		`"_ng_rollout_id":""`, `"_ng_rollout_id":"-bad"`, `"_ng_rollout_id":7`, `"_ng_rollout_id":null,"_ng_task_index":1,"_ng_rollout_index":0`,
		`"_ng_task_index":"3","_ng_rollout_index":1`, `"_ng_task_index":1.5,"_ng_rollout_index":1`,
		`"_ng_task_index":3,"_ng_rollout_index":1,"_ng_task_index":4`,
	} {
		body := `{` + params
		if bk != "" {
			body += "," + bk
		}
		body += `}`
		var row RunRequest
		if err := json.Unmarshal([]byte(body), &row); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want, wantOK, err := row.ResolveRolloutID()
		wantOK = wantOK && err == nil
		got, ok := RolloutIDOfRow([]byte(body))
		if got != want || ok != wantOK {
			t.Errorf("%s: RolloutIDOfRow = %q, %v; the decoded row's = %q, %v", bk, got, ok, want, wantOK)
		}
	}
	for _, bad := range []string{``, `[]`, `{`, `null`} {
		if id, ok := RolloutIDOfRow([]byte(bad)); ok {
			t.Errorf("%q names rollout %q", bad, id)
		}
	}
}

func BenchmarkRolloutIDOfRow(b *testing.B) {
	body := []byte(`{"responses_create_params":{"input":[{"role":"user","content":"What is 1 + 1?"}],"temperature":0.5},"expected_answer":"2","_ng_task_index":3,"_ng_rollout_index":1}`)
	b.Run("bookkeeping", func(b *testing.B) {
		for b.Loop() {
			RolloutIDOfRow(body)
		}
	})
	b.Run("whole row", func(b *testing.B) {
		for b.Loop() {
			var r RunRequest
			_ = json.Unmarshal(body, &r)
			_, _, _ = r.ResolveRolloutID()
		}
	})
}
