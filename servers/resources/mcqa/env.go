package mcqa

import (
	"context"
	"encoding/json"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// row is a task as the verify request carries it: Task's members, with
// upstream's defaults for those that are absent. grading_mode is read
// raw, so that an empty or null value is told from an absent one.
type row struct {
	Task
	Mode json.RawMessage `json:"grading_mode"`
}

// Validate refuses a task grading mode upstream's Literal does not
// allow (null and "" included), with pydantic's error at the member, and
// puts an allowed one in the task.
func (r *row) Validate() error {
	if r.Mode == nil {
		r.GradingMode = DefaultGradingMode
		return nil
	}
	var mode string
	if json.Unmarshal(r.Mode, &mode) == nil {
		switch mode {
		case ModeStrictSingleLetterBoxed, ModeLenientBoxed, ModeLenientAnswerColon:
			r.GradingMode = mode
			return nil
		}
	}
	return &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrLiteral,
		Loc: []any{"grading_mode"}, Input: r.Mode,
		Msg: "Input should be '" + ModeStrictSingleLetterBoxed + "', '" + ModeLenientBoxed + "' or '" + ModeLenientAnswerColon + "'"}}}
}

// New validates cfg and returns the mcqa environment: POST /verify reads
// the option letter from the response's output text
// (Response.OutputText) with Score and answers the request echoed with
// reward, expected_answer and extracted_answer (Result.Fields); GET
// /reverify_mode answers "stateless".
//
// Upstream's response drops the request members its model does not
// declare; this one echoes every member of the row. That is deliberate:
// nothing a row carries is lost on the way to the results file, and the
// members upstream returns are all there, expected_answer with the
// normalised value upstream reports.
//
// A row whose members have the wrong types, or whose grading_mode is not
// one a task may name (null and "" included), is refused with 422, as
// upstream refuses it. The rows on which upstream's verifier raises
// (500) are scored: see the package documentation. Only an output_regex
// beyond this port (ErrUnsupportedPattern) fails the verification with
// 500.
func New(cfg Config) (*environment.Environment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	verify := func(_ context.Context, req *protocol.VerifyRequest, r row) (environment.Score, error) {
		if raw, ok := req.Fields.Get("template_metadata"); ok {
			r.Task.SetTemplateJSON(raw)
		}
		res, err := Score(cfg, r.Task, req.Response.OutputText())
		if err != nil {
			return environment.Score{}, err
		}
		return environment.Score{Reward: res.Reward}.WithFields(res.Fields()), nil
	}
	return environment.New(ServerName, environment.Verify(verify),
		environment.ReverifyMode(ReverifyMode)), nil
}
