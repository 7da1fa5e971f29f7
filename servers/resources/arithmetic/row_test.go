package arithmetic_test

import (
	"encoding/json"
	"testing"

	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
)

// The environment's own dataset row is one it scores: 1 for the right
// answer, 0 for another.
func TestRowIsScored(t *testing.T) {
	env, err := arithmetic.New(arithmetic.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	base := envtest.Serve(t, env)
	row := arithmetic.Row("arith-000001", "What is 3 + 4?", "7")
	for answer, want := range map[string]float64{"The answer is 7.": 1, "The answer is 8.": 0} {
		status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(row, envtest.Answer(answer)))
		var reward float64
		if status != 200 || json.Unmarshal(envtest.Members(t, raw)["reward"], &reward) != nil || reward != want {
			t.Errorf("answer %q: %d %s, want reward %v", answer, status, raw, want)
		}
	}
}
