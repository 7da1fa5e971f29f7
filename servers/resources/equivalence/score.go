package equivalence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ServerName is the name of the upstream resources server this package
// scores for, and its default instance name.
const ServerName = "equivalence_rule"

// The grading rules, as spelled in the grading_rule configuration key.
const (
	// RuleExact scores 1 when the normalised answer equals the
	// normalised expected answer, else 0. It is the default.
	RuleExact = "exact"
	// RuleSeqMatch scores Ratio(normalised answer, normalised expected).
	RuleSeqMatch = "seq_match"
	// RuleWeightedSeqMatch scores 0.85 times the RuleSeqMatch ratio plus
	// 0.15 times the ratio of the ten-code-point prefixes, clamped to
	// [0, 1].
	RuleWeightedSeqMatch = "weighted_seq_match"
)

// FieldEquivalenceScore is the response key under which upstream reports
// the score next to "reward".
const FieldEquivalenceScore = "equivalence_score"

// Weights of the weighted_seq_match rule and the prefix length it uses.
const (
	weightFull   = 0.85
	weightPrefix = 0.15
	prefixLen    = 10
)

// Rules returns the valid grading_rule values, the default first.
func Rules() []string {
	return []string{RuleExact, RuleSeqMatch, RuleWeightedSeqMatch}
}

// Config is the server configuration, the keys of the server's block in a
// fleet YAML file that scoring depends on. The zero value is usable and
// means the defaults.
type Config struct {
	// GradingRule selects how every task is scored: "exact" (the
	// default), "seq_match" or "weighted_seq_match". Values are case
	// sensitive. The empty string stands for the default.
	GradingRule string `json:"grading_rule" yaml:"grading_rule"`
}

// Defaults returns the default configuration: grading rule "exact".
func Defaults() Config { return Config{GradingRule: RuleExact} }

// Validate reports a configuration that cannot score: a grading rule that
// is not one of Rules().
func (c Config) Validate() error {
	_, err := c.rule()
	return err
}

// rule returns the effective grading rule of c.
func (c Config) rule() (string, error) {
	switch c.GradingRule {
	case "":
		return RuleExact, nil
	case RuleExact, RuleSeqMatch, RuleWeightedSeqMatch:
		return c.GradingRule, nil
	}
	return "", fmt.Errorf("equivalence: unknown grading_rule %q (valid: %s)",
		c.GradingRule, strings.Join(Rules(), ", "))
}

// Task is the part of a task row that scoring reads. Upstream accepts and
// echoes every other row field (question, hashid, ...); carrying them is
// left to the caller.
type Task struct {
	// ExpectedAnswer is the reference answer. Upstream requires it to be
	// present and a JSON string; DecodeTask enforces that.
	ExpectedAnswer string `json:"expected_answer"`
}

// ErrExpectedAnswer is wrapped by the error DecodeTask returns for a row
// whose expected_answer is missing, null or not a string. Upstream rejects
// such a request (HTTP 422) before scoring it.
var ErrExpectedAnswer = errors.New("expected_answer must be a string")

// DecodeTask reads the scoring fields from a JSON task row (or verify
// request body), which must be an object. Unlike a plain json.Unmarshal
// into Task, it fails, with an error wrapping ErrExpectedAnswer, when
// expected_answer is absent, null or of another type, as upstream's
// request validation does. Other fields are ignored.
func DecodeTask(row []byte) (Task, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(row, &fields); err != nil {
		return Task{}, fmt.Errorf("equivalence: task row: %w", err)
	}
	if fields == nil {
		return Task{}, errors.New("equivalence: task row is null, not an object")
	}
	raw, ok := fields["expected_answer"]
	if !ok {
		return Task{}, fmt.Errorf("equivalence: task row has no expected_answer: %w", ErrExpectedAnswer)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return Task{}, fmt.Errorf("equivalence: task row expected_answer is %s: %w", jsonKind(raw), ErrExpectedAnswer)
	}
	var t Task
	if err := json.Unmarshal(raw, &t.ExpectedAnswer); err != nil {
		return Task{}, fmt.Errorf("equivalence: task row expected_answer: %w", err)
	}
	return t, nil
}

// jsonKind names the JSON type of a raw value, for error messages that
// must not quote task data.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "a number"
}

// Result is the outcome of scoring one answer.
type Result struct {
	// Reward is the score in [0, 1]; upstream reports it both as
	// "reward" and as "equivalence_score".
	Reward float64
	// Rule is the grading rule that produced Reward, never empty.
	Rule string
}

// Fields returns the keys upstream adds to the verify response besides
// "reward" and the echoed request: only "equivalence_score", equal to the
// reward.
func (r Result) Fields() map[string]any {
	return map[string]any{FieldEquivalenceScore: r.Reward}
}

// Score grades an answer against task.ExpectedAnswer with the rule of
// cfg. texts are the text fields of the output_text content parts of the
// response's message items, in response order; they are joined with no
// separator (JoinTexts) to form the answer, so nil or an empty slice is
// the empty answer. The only error is an invalid cfg.
func Score(cfg Config, task Task, texts []string) (Result, error) {
	return ScoreText(cfg, task, JoinTexts(texts))
}

// ScoreText is Score for an answer that is already one string.
func ScoreText(cfg Config, task Task, answer string) (Result, error) {
	rule, err := cfg.rule()
	if err != nil {
		return Result{}, err
	}
	got := normalizeRunes([]rune(answer))
	want := normalizeRunes([]rune(task.ExpectedAnswer))
	var reward float64
	switch rule {
	case RuleExact:
		if string(got) == string(want) {
			reward = 1
		}
	case RuleSeqMatch:
		reward = RatioRunes(got, want)
	case RuleWeightedSeqMatch:
		reward = weighted(got, want)
	}
	return Result{Reward: reward, Rule: rule}, nil
}

// weighted is the weighted_seq_match score of two normalised strings.
func weighted(got, want []rune) float64 {
	full := RatioRunes(got, want)
	prefix := want[:min(prefixLen, len(want))]
	head := got[:min(len(prefix), len(got))]
	start := RatioRunes(head, prefix)
	// The conversions round each product on its own, as Python does, and
	// keep the compiler from fusing multiply and add into one rounding.
	r := float64(weightFull*full) + float64(weightPrefix*start)
	return max(0.0, min(1.0, r))
}
