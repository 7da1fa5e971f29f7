package stringmatch

import (
	"github.com/gymlens/gymlens/servers/resources/internal/pystr"

	"errors"
	"strings"
)

// ServerName is the name of the upstream resources server this package
// ports.
const ServerName = "string_match"

// Extraction modes: the values a task's extraction_mode may take.
const (
	ModeBoxed        = "boxed"
	ModeFinalAnswer  = "final_answer"
	ModeLastLine     = "last_line"
	ModeFullResponse = "full_response"

	// DefaultExtractionMode is the mode of a task that names none.
	DefaultExtractionMode = ModeFinalAnswer
)

// ExtractionModes returns the valid extraction modes, in upstream's
// order.
func ExtractionModes() []string {
	return []string{ModeBoxed, ModeFinalAnswer, ModeLastLine, ModeFullResponse}
}

// ErrInvalidTask is wrapped by the errors returned for a task that
// upstream refuses to accept (it rejects the request before scoring).
var ErrInvalidTask = errors.New("stringmatch: invalid task")

// Config is the server-level configuration. Upstream's string_match
// server declares no settings of its own: the keys of its YAML block
// (entrypoint, domain, verified, description, value) and the ones every
// resources server inherits (host, port, name, num_workers,
// expose_tools_over_mcp) describe how the server is run and listed, and
// none of them changes a score. The struct exists so that callers have a
// stable place for settings should any appear.
type Config struct{}

// Defaults returns the default configuration (the zero value).
func Defaults() Config { return Config{} }

// Task holds the per-row fields that steer scoring. Rows carry other
// members too (responses_create_params, and at verify time the model's
// response); they do not take part in scoring and are not modelled here.
type Task struct {
	// ExpectedAnswer is the reference answer (upstream: required string).
	// An empty one makes every answer score 0.
	ExpectedAnswer string `json:"expected_answer"`
	// ExtractionMode is one of ExtractionModes; nil (key absent) means
	// DefaultExtractionMode. Any other value, "" included, makes the task
	// invalid.
	ExtractionMode *string `json:"extraction_mode,omitempty"`
	// CaseSensitive selects exact comparison of the trimmed strings
	// instead of the normalising grader. Default false.
	CaseSensitive bool `json:"case_sensitive"`
	// Metadata is free-form row data (upstream: optional object, default
	// null); scoring ignores it.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Mode returns the task's extraction mode, DefaultExtractionMode when
// none is set. It does not check the value; Validate does.
func (t Task) Mode() string {
	if t.ExtractionMode == nil {
		return DefaultExtractionMode
	}
	return *t.ExtractionMode
}

// Validate reports a task upstream would reject: an extraction mode
// outside ExtractionModes. The error wraps ErrInvalidTask.
func (t Task) Validate() error {
	_, _, err := Extract("", t.Mode())
	return err
}

// Result is the outcome of scoring one answer.
//
// Upstream's verify response is the base one (responses_create_params,
// response, reward) plus exactly two keys, which Fields returns:
// "expected_answer" (string, the task's value) and "extracted_answer"
// (string, or null when nothing was extracted). The task's
// extraction_mode, case_sensitive and metadata are not echoed.
type Result struct {
	// Reward is 1, SoftReward or 0.
	Reward float64
	// ExpectedAnswer is the task's expected answer, as given.
	ExpectedAnswer string
	// ExtractedAnswer is the answer that was graded, nil when the mode
	// found none (upstream's None).
	ExtractedAnswer *string
	// Rule is the check that accepted the answer; RuleNone when the
	// reward is 0. It is not part of upstream's response.
	Rule Rule
}

// Fields returns the members upstream adds to its verify response, under
// upstream's keys: "expected_answer" as a string and "extracted_answer"
// as a string or nil (JSON null).
func (r Result) Fields() map[string]any {
	var extracted any
	if r.ExtractedAnswer != nil {
		extracted = *r.ExtractedAnswer
	}
	return map[string]any{
		"expected_answer":  r.ExpectedAnswer,
		"extracted_answer": extracted,
	}
}

// ResponseText builds the text upstream extracts from, given the texts
// gathered from a Responses API response in order: for every output item
// of type "message" and role "assistant" (all of them, not only the
// last), the text of each content part that has one, that is each
// output_text part, empty ones included (refusal parts have none), or
// the content itself when it is a plain string. The texts are joined
// with "\n" and the result is trimmed of Python whitespace. Reasoning,
// function-call and other items contribute nothing.
func ResponseText(assistantTexts []string) string {
	return pystr.Strip(strings.Join(assistantTexts, "\n"))
}

// Score extracts the answer from text as the task's mode says and grades
// it against the task's expected answer. text is the assistant text as
// ResponseText builds it. When nothing is extracted, or the expected
// answer is empty, the reward is 0 (the extracted answer is still
// reported). With CaseSensitive the trimmed strings must be identical;
// otherwise Grade decides. The only error is an invalid task (wrapping
// ErrInvalidTask); cfg is currently unused.
func Score(cfg Config, task Task, text string) (Result, error) {
	_ = cfg
	answer, ok, err := Extract(text, task.Mode())
	if err != nil {
		return Result{}, err
	}
	res := Result{ExpectedAnswer: task.ExpectedAnswer}
	if !ok {
		return res, nil
	}
	res.ExtractedAnswer = &answer
	if task.ExpectedAnswer == "" {
		return res, nil
	}
	if task.CaseSensitive {
		if pystr.Strip(answer) == pystr.Strip(task.ExpectedAnswer) {
			res.Reward, res.Rule = 1, RuleCaseSensitive
		}
		return res, nil
	}
	res.Reward, res.Rule = Grade(task.ExpectedAnswer, answer)
	return res, nil
}
