package equivalence

import (
	"context"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// row is a task as the verify request carries it: expected_answer is a
// required string, as upstream's request model requires.
type row struct {
	ExpectedAnswer string `json:"expected_answer" gym:"required"`
}

// OutputTexts gathers the texts Score joins: the text of every
// output_text part of every message item of the response, in order,
// whatever the message's role.
func OutputTexts(resp *protocol.Response) []string {
	var texts []string
	for _, it := range resp.Output {
		if it.Type != protocol.TypeMessage || it.Content == nil {
			continue
		}
		for _, p := range it.Content.Parts {
			if p.Type == protocol.PartOutputText {
				texts = append(texts, p.Text)
			}
		}
	}
	return texts
}

// New validates cfg and returns the equivalence_rule environment: POST
// /verify scores the response's output text (OutputTexts, joined by
// Score) against the row's expected_answer with cfg's grading rule, and
// answers the request echoed, every member kept as upstream keeps them
// (its models allow extra members), with reward and equivalence_score.
// A row without a string expected_answer is refused with 422.
func New(cfg Config) (*environment.Environment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	verify := func(_ context.Context, req *protocol.VerifyRequest, r row) (environment.Score, error) {
		res, err := Score(cfg, Task{ExpectedAnswer: r.ExpectedAnswer}, OutputTexts(&req.Response))
		if err != nil {
			return environment.Score{}, err
		}
		return environment.Score{Reward: res.Reward}.WithFields(res.Fields()), nil
	}
	return environment.New(ServerName, environment.Verify(verify)), nil
}
