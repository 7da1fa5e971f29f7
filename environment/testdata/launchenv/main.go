// Command launchenv is the environment program the launch tests start as
// a fleet's launcher starts a server: no flags, only NEMO_GYM_CONFIG_DICT
// and NEMO_GYM_CONFIG_PATH. Verify gives reward 1 when the answer is the
// row's expected_answer; the tool "config" answers the program's own
// block of the config, as environment.LaunchConfig reads it.
package main

import (
	"context"
	"strings"

	"github.com/gymlens/gymlens/environment"
)

// task is what verify reads from the row.
type task struct {
	Expected string `json:"expected_answer" gym:"required"`
}

func main() {
	environment.Main(environment.New("launchenv",
		environment.Verify(func(_ context.Context, req *environment.VerifyRequest, t task) (environment.Score, error) {
			if strings.TrimSpace(req.Response.OutputText()) == t.Expected {
				return environment.Score{Reward: 1}, nil
			}
			return environment.Score{}, nil
		}),
		environment.Tool("config", "The program's own block of the fleet config.",
			func(context.Context, struct{}) (map[string]any, error) {
				cfg, launched, err := environment.LaunchConfig()
				if err != nil {
					return nil, err
				}
				return map[string]any{"launched": launched, "config": cfg}, nil
			}),
	))
}
