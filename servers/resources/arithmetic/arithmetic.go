package arithmetic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/protocol"
)

// ServerName is the name of this environment: its implementation name in
// a fleet configuration (gymlens serve resources_servers --impl arithmetic).
const ServerName = "arithmetic"

// Members the verify response adds to the echoed row.
const (
	// FieldExpectedAnswer is the task's expected answer, as given.
	FieldExpectedAnswer = "expected_answer"
	// FieldExtractedAnswer is the number read from the answer (thousands
	// separators removed), or null when the answer has none.
	FieldExtractedAnswer = "extracted_answer"
)

// ErrExpectedNotNumber is wrapped by the error a verification returns when
// the task's expected answer is not a number. The task is unusable, so the
// verification fails (HTTP 500) rather than scoring the answer 0.
var ErrExpectedNotNumber = errors.New("expected answer is not a number")

// Config configures the arithmetic environment. The zero value is a
// working configuration: exact comparison, no fault injection.
type Config struct {
	// Tolerance is the largest absolute difference between the parsed
	// answer and the expected value that still counts as correct. 0 (the
	// default) demands exact equality; 7 and 7.0 are equal either way.
	Tolerance float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"`
	// PanicOnTaskPrefix is a fault injection for tests: when it is not
	// empty, verifying a row whose task_id field starts with it panics
	// (rows without a task_id never do).
	PanicOnTaskPrefix string `json:"panic_on_task_prefix,omitempty" yaml:"panic_on_task_prefix,omitempty"`
	// DelayOnTaskPrefix and DelayMS are a fault injection for tests: when
	// the prefix is not empty, verifying a row whose task_id starts with
	// it first waits DelayMS milliseconds (or until the request is
	// cancelled), making those rollouts slow. DelayMS must be in
	// [0, 60000], and above 0 only with a prefix.
	DelayOnTaskPrefix string  `json:"delay_on_task_prefix,omitempty" yaml:"delay_on_task_prefix,omitempty"`
	DelayMS           float64 `json:"delay_ms,omitempty" yaml:"delay_ms,omitempty"`
	// WorkMicros is a benchmarking aid: when it is above 0, every
	// verification first spends about that many microseconds of CPU on a
	// fixed computation (chained SHA-256), so that load tests see a server
	// whose handler costs something, as a real verifier does. The amount
	// of computation is calibrated once, in New, on the machine the server
	// runs on. 0 (the default) adds nothing; the largest accepted value is
	// one second.
	WorkMicros int `json:"work_us,omitempty" yaml:"work_us,omitempty"`
}

// maxDelayMS bounds Config.DelayMS: a minute.
const maxDelayMS = 60_000

// Defaults returns the default configuration, which is the zero value.
func Defaults() Config { return Config{} }

// Validate reports a configuration the environment cannot run with.
func (c Config) Validate() error {
	if c.Tolerance < 0 || math.IsNaN(c.Tolerance) || math.IsInf(c.Tolerance, 0) {
		return fmt.Errorf("resources: tolerance must be a finite number >= 0, got %v", c.Tolerance)
	}
	if c.DelayMS < 0 || c.DelayMS > maxDelayMS || math.IsNaN(c.DelayMS) {
		return fmt.Errorf("resources: delay_ms must be in [0, %d], got %v", maxDelayMS, c.DelayMS)
	}
	if c.DelayMS > 0 && c.DelayOnTaskPrefix == "" {
		return errors.New("resources: delay_ms needs delay_on_task_prefix (the tasks to delay)")
	}
	if c.WorkMicros < 0 || c.WorkMicros > maxWorkMicros {
		return fmt.Errorf("resources: work_us must be in [0, %d], got %d", maxWorkMicros, c.WorkMicros)
	}
	return nil
}

// Task is what the verifier reads from a dataset row.
type Task struct {
	// ExpectedAnswer is the exact result, written as a number ("42",
	// "-3", "1,234.5"). Required: a row without it, or with a value that
	// is not a string, is refused with 422.
	ExpectedAnswer string `json:"expected_answer" gym:"required"`
	// TaskID optionally names the task; fault injection
	// (Config.PanicOnTaskPrefix) matches it.
	TaskID string `json:"task_id"`
}

// New validates cfg and returns the arithmetic environment: POST /verify
// reads the last number of the model's answer text (every output_text
// part of the response's messages, Response.OutputText) and compares it
// exactly, as a rational number, with the task's expected_answer.
//
// Answers: 200 with reward 1 when they are equal (within the tolerance),
// reward 0 for any other answer, one without a number included; 422 (from
// the SDK) for a row without a string expected_answer, not counted as a
// verification; 500 when the expected answer is not a number (the error
// wraps ErrExpectedNotNumber; a broken task, counted as a failed
// verification) or when the verifier panics. The response echoes the row
// and adds expected_answer and extracted_answer. Verification depends on
// the request alone, so GET /reverify_mode answers "stateless".
func New(cfg Config) (*environment.Environment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := &verifier{cfg: cfg, workRounds: calibrateWork(cfg.WorkMicros)}
	if cfg.Tolerance > 0 {
		v.tolerance = new(big.Rat).SetFloat64(cfg.Tolerance)
	}
	return environment.New(ServerName, environment.Verify(v.verify),
		environment.ReverifyMode(protocol.ReverifyStateless)), nil
}

type verifier struct {
	cfg        Config
	tolerance  *big.Rat // nil: exact comparison
	workRounds int      // SHA-256 rounds per verification (Config.WorkMicros); 0: none
}

// verify scores one answer. It returns an error wrapping
// ErrExpectedNotNumber when the task cannot be scored.
func (v *verifier) verify(ctx context.Context, req *protocol.VerifyRequest, task Task) (environment.Score, error) {
	if v.cfg.PanicOnTaskPrefix != "" && strings.HasPrefix(task.TaskID, v.cfg.PanicOnTaskPrefix) {
		panic("resources: injected verifier fault")
	}
	if v.cfg.DelayMS > 0 && strings.HasPrefix(task.TaskID, v.cfg.DelayOnTaskPrefix) {
		t := time.NewTimer(time.Duration(v.cfg.DelayMS * float64(time.Millisecond)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return environment.Score{}, ctx.Err()
		}
	}
	if v.workRounds > 0 {
		doWork(task.TaskID+"\x00"+task.ExpectedAnswer, v.workRounds)
	}
	want, ok := parseNumber(strings.TrimSpace(task.ExpectedAnswer))
	if !ok {
		// Neither the expected value nor the answer goes into the message:
		// both are task data, and the message reaches spans.
		return environment.Score{}, fmt.Errorf("resources: task %s: %w", taskName(req, task), ErrExpectedNotNumber)
	}
	score := environment.Score{}.With(FieldExpectedAnswer, task.ExpectedAnswer)
	tok, found := LastNumber(req.Response.OutputText())
	if !found {
		return score.With(FieldExtractedAnswer, nil), nil
	}
	score = score.With(FieldExtractedAnswer, tok)
	if got, ok := parseNumber(tok); ok && v.equal(got, want) {
		score.Reward = 1
	}
	return score, nil
}

// taskName names a task in an error: its task_id, else its index.
func taskName(req *protocol.VerifyRequest, task Task) string {
	switch {
	case task.TaskID != "":
		return strconv.Quote(task.TaskID)
	case req.TaskIndex != nil:
		return "#" + strconv.Itoa(*req.TaskIndex)
	}
	return "(unnamed)"
}

func (v *verifier) equal(a, b *big.Rat) bool {
	if v.tolerance == nil {
		return a.Cmp(b) == 0
	}
	d := new(big.Rat).Sub(a, b)
	return d.Abs(d).Cmp(v.tolerance) <= 0
}

// maxNumberLen bounds the numbers the verifier parses.
const maxNumberLen = 4096

// parseNumber reads s, which must be exactly one number in the grammar
// LastNumber understands, with nothing around it.
func parseNumber(s string) (*big.Rat, bool) {
	// A number thousands of digits long is no answer to anything, and exact
	// arithmetic on it would cost seconds of CPU per request.
	if s == "" || len(s) > maxNumberLen {
		return nil, false
	}
	st, e, commas := scanNumber(s, 0)
	if st != 0 || e != len(s) {
		return nil, false
	}
	return new(big.Rat).SetString(normalize(s, commas))
}

// LastNumber returns the last number written in text, with thousands
// separators removed: "The answer is 7." gives "7", "about -1,234.50 units"
// gives "-1234.50". A number is an optional sign (only when it does not
// follow a letter or digit, so "x-3" reads as 3), digits with optional
// comma-separated groups of three, and an optional fraction; ".5" is read as
// 0.5 and a trailing dot ends a sentence rather than starting a fraction.
// found is false when text holds no digit.
func LastNumber(text string) (number string, found bool) {
	start, end, commas := -1, -1, false
	for i := 0; i < len(text); {
		s, e, c := scanNumber(text, i)
		if s < 0 {
			i++
			continue
		}
		start, end, commas = s, e, c
		i = e
	}
	if start < 0 {
		return "", false
	}
	return normalize(text[start:end], commas), true
}

// normalize turns a scanned number into the plain form big.Rat reads and
// the extracted_answer reports: no separators, no plus sign, a leading
// zero before a bare fraction.
func normalize(n string, commas bool) string {
	if commas {
		n = strings.ReplaceAll(n, ",", "")
	}
	n = strings.TrimPrefix(n, "+")
	if strings.HasPrefix(n, ".") {
		n = "0" + n
	} else if strings.HasPrefix(n, "-.") {
		n = "-0" + n[1:]
	}
	return n
}

// scanNumber tries to read a number starting exactly at i. It returns its
// bounds and whether it used thousands separators, or s = -1.
func scanNumber(text string, i int) (s, e int, commas bool) {
	j := i
	if text[j] == '-' || text[j] == '+' {
		if j > 0 && isWordByte(text[j-1]) {
			return -1, -1, false
		}
		j++
	}
	intStart := j
	for j < len(text) && isDigit(text[j]) {
		j++
	}
	intDigits := j - intStart
	if intDigits > 0 && intDigits <= 3 {
		// Thousands groups: ",ddd" not followed by another digit.
		for j+4 <= len(text) && text[j] == ',' && isDigit(text[j+1]) && isDigit(text[j+2]) && isDigit(text[j+3]) &&
			(j+4 == len(text) || !isDigit(text[j+4])) {
			j += 4
			commas = true
		}
	}
	if j+1 < len(text) && text[j] == '.' && isDigit(text[j+1]) {
		j++
		for j < len(text) && isDigit(text[j]) {
			j++
		}
	} else if intDigits == 0 {
		return -1, -1, false
	}
	return i, j, commas
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isWordByte(b byte) bool {
	return isDigit(b) || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_'
}
