package resources_test

import (
	"encoding/json"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/environment/envtest"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
	"github.com/gymlens/gymlens/servers/resources/equivalence"
	"github.com/gymlens/gymlens/servers/resources/mcqa"
	"github.com/gymlens/gymlens/servers/resources/stringmatch"
)

// Each environment is named for its implementation (ServerName, which its
// registry row and session cookie use), and its own dataset row is one it
// scores: reward 1 for the right answer, 0 for another. (The counter's row is scored on the
// session's counter, which its tools change; package dataset and the
// counter's own tests cover it.)
func TestRowIsScoredByItsEnvironment(t *testing.T) {
	must := func(env *environment.Environment, err error) *environment.Environment {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, c := range []struct {
		name         string
		env          *environment.Environment
		row          protocol.RunRequest
		right, wrong string
	}{
		{arithmetic.ServerName, must(arithmetic.New(arithmetic.Defaults())), arithmetic.Row("arith-000001", "What is 3 + 4?", "7"),
			"The answer is 7.", "The answer is 8."},
		{stringmatch.ServerName, must(stringmatch.New(stringmatch.Defaults())), stringmatch.Row("What is 3 + 4?", "7"),
			`The answer is \boxed{7}.`, `The answer is \boxed{8}.`},
		{equivalence.ServerName, must(equivalence.New(equivalence.Defaults())), equivalence.Row("What is 3 + 4?", "7"), "7", "8"},
		{mcqa.ServerName, must(mcqa.New(mcqa.Defaults())), mcqa.Row("What is 3 + 4?", []string{"6", "7", "8"}, 1),
			`\boxed{B}`, `\boxed{C}`},
	} {
		if c.env.Name() != c.name {
			t.Errorf("environment %q, want %q", c.env.Name(), c.name)
		}
		base := envtest.Serve(t, c.env)
		for answer, want := range map[string]float64{c.right: 1, c.wrong: 0} {
			status, raw := envtest.NewSession(t, base).Post("/verify", envtest.Verify(c.row, envtest.Answer(answer)))
			var reward float64
			if status != 200 || json.Unmarshal(envtest.Members(t, raw)["reward"], &reward) != nil || reward != want {
				t.Errorf("%s, answer %q: %d %s, want reward %v", c.env.Name(), answer, status, raw, want)
			}
		}
	}
}
