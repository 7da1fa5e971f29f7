package mcqa_test

import (
	"encoding/json"
	"testing"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/servers/resources/mcqa"
)

// The environment's own dataset row is one it scores: 1 for the right
// answer, 0 for another.
func TestRowIsScored(t *testing.T) {
	env, err := mcqa.New(mcqa.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	base := envtest.Serve(t, env)
	row := mcqa.Row("What is 3 + 4?", []string{"6", "7", "8"}, 1)
	for answer, want := range map[string]float64{"\\boxed{B}": 1, "\\boxed{C}": 0} {
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer(answer)))
		var reward float64
		if status != 200 || json.Unmarshal(envtest.Members(t, raw)["reward"], &reward) != nil || reward != want {
			t.Errorf("answer %q: %d %s, want reward %v", answer, status, raw, want)
		}
	}
}
