package stringmatch

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// Validate reports a configuration the server cannot run with; every
// Config is valid (it has no settings).
func (Config) Validate() error { return nil }

// row is a task as the verify request carries it. expected_answer is
// required, as upstream's request model requires it; the other members
// have upstream's defaults.
type row struct {
	ExpectedAnswer string         `json:"expected_answer" gym:"required"`
	ExtractionMode *string        `json:"extraction_mode"`
	CaseSensitive  bool           `json:"case_sensitive"`
	Metadata       map[string]any `json:"metadata"`
}

func (r *row) task() Task {
	return Task{ExpectedAnswer: r.ExpectedAnswer, ExtractionMode: r.ExtractionMode,
		CaseSensitive: r.CaseSensitive, Metadata: r.Metadata}
}

// Validate refuses an extraction mode upstream's Literal does not allow,
// with pydantic's error at the member.
func (r *row) Validate() error {
	if r.task().Validate() == nil {
		return nil
	}
	quoted := make([]string, 0, 4)
	for _, m := range ExtractionModes() {
		quoted = append(quoted, "'"+m+"'")
	}
	msg := "Input should be " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	input, _ := json.Marshal(*r.ExtractionMode)
	return &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrLiteral,
		Loc: []any{"extraction_mode"}, Msg: msg, Input: input}}}
}

// AssistantTexts gathers, in order, the texts ResponseText joins: for
// every message item of the response whose role is assistant (the
// default of an output message), the text of each output_text part, or
// the content itself when it is a plain string.
func AssistantTexts(resp *protocol.Response) []string {
	var texts []string
	for _, it := range resp.Output {
		if it.Type != protocol.TypeMessage || (it.Role != protocol.RoleAssistant && it.Role != "") || it.Content == nil {
			continue
		}
		if it.Content.Parts == nil {
			texts = append(texts, it.Content.Text)
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

// New returns the string_match environment: POST /verify extracts the
// answer from the assistant text (AssistantTexts joined by
// ResponseText) as the row's extraction_mode says, grades it with Score
// against expected_answer, and answers the request echoed with reward,
// expected_answer and extracted_answer (Result.Fields).
//
// Upstream's response drops the request members its model does not
// declare; this one echoes every member of the row. That is deliberate:
// nothing a row carries is lost on the way to the results file, and the
// members upstream returns are all there with the same values.
//
// A row without a string expected_answer, or with an extraction_mode
// outside ExtractionModes, is refused with 422, as upstream refuses it.
func New(cfg Config) (*environment.Environment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	verify := func(_ context.Context, req *protocol.VerifyRequest, r row) (environment.Score, error) {
		res, err := Score(cfg, r.task(), ResponseText(AssistantTexts(&req.Response)))
		if err != nil {
			return environment.Score{}, err
		}
		return environment.Score{Reward: res.Reward}.WithFields(res.Fields()), nil
	}
	return environment.New(ServerName, environment.Verify(verify)), nil
}
