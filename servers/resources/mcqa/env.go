package mcqa

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
)

// row is a task as the verify request carries it: Task's members, with
// upstream's defaults for those that are absent.
type row struct {
	Task
}

// Validate refuses a task grading mode upstream's Literal does not
// allow, with pydantic's error at the member.
func (r *row) Validate() error {
	switch r.GradingMode {
	case "", ModeStrictSingleLetterBoxed, ModeLenientBoxed, ModeLenientAnswerColon:
		return nil
	}
	input, _ := json.Marshal(r.GradingMode)
	return &protocol.ValidationError{Detail: []protocol.FieldError{{Type: protocol.ErrLiteral,
		Loc: []any{"grading_mode"}, Input: input,
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
// one a task may name, is refused with 422; an output_regex upstream
// cannot evaluate fails the verification with 500, as upstream's does.
func New(cfg Config) (*environment.Environment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	verify := func(_ context.Context, req *protocol.VerifyRequest, r row) (environment.Score, error) {
		res, err := Score(cfg, r.Task, req.Response.OutputText())
		if err != nil {
			return environment.Score{}, err
		}
		return environment.Score{Reward: res.Reward}.WithFields(res.Fields()), nil
	}
	return environment.New(ServerName, environment.Verify(verify),
		environment.ReverifyMode(ReverifyMode)), nil
}

// Register validates cfg and puts the mcqa environment's routes on s,
// which should be built with ServerOptions.
func Register(s *server.Server, cfg Config) error {
	if s == nil {
		return errors.New("mcqa: nil server")
	}
	env, err := New(cfg)
	if err != nil {
		return err
	}
	return env.Register(s)
}

// ServerOptions returns the server options the environment needs for
// the fleet instance called instance (see environment.ServerOptions).
func ServerOptions(instance string) server.Options {
	return environment.ServerOptions(ServerName, instance)
}
