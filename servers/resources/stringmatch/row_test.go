package stringmatch_test

import (
	"encoding/json"
	"testing"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/servers/resources/stringmatch"
)

// The environment's own dataset row is one it scores: 1 for the right
// answer, 0 for another.
func TestRowIsScored(t *testing.T) {
	env, err := stringmatch.New(stringmatch.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	base := envtest.Serve(t, env)
	row := stringmatch.Row("What is 3 + 4?", "7")
	for answer, want := range map[string]float64{"The answer is \\boxed{7}.": 1, "The answer is \\boxed{8}.": 0} {
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer(answer)))
		var reward float64
		if status != 200 || json.Unmarshal(envtest.Members(t, raw)["reward"], &reward) != nil || reward != want {
			t.Errorf("answer %q: %d %s, want reward %v", answer, status, raw, want)
		}
	}
}
