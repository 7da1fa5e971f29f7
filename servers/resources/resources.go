package resources

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/lens"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/telemetry"
	"github.com/gymlens/gymlens/telemetry/metrics"
)

// ServerName is the name this server has in a fleet configuration.
const ServerName = "arithmetic"

// SpanName is the name of the span around one verification.
const SpanName = "gym.verify"

// Span attribute keys set on the gym.verify span.
const (
	AttrTaskID  = "nemo.gym.task.id"
	AttrReward  = "nemo.gym.verify.reward"
	AttrCorrect = "nemo.gym.verify.correct"
)

// ErrExpectedNotNumber is wrapped by the error a verification returns when
// the task's expected answer is not a number. The task is unusable, so the
// verification fails (HTTP 500) rather than scoring the answer 0.
var ErrExpectedNotNumber = errors.New("expected answer is not a number")

// errPanicked is what a panicking verification records on its span.
var errPanicked = errors.New("verifier panicked")

// Config configures the arithmetic resources server. The zero value is a
// working configuration: exact comparison, no fault injection.
type Config struct {
	// Tolerance is the largest absolute difference between the parsed
	// answer and the expected value that still counts as correct. 0 (the
	// default) demands exact equality; 7 and 7.0 are equal either way.
	Tolerance float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"`
	// PanicOnTaskPrefix is a fault injection for tests: when it is not
	// empty, verifying a task whose ID starts with it panics.
	PanicOnTaskPrefix string `json:"panic_on_task_prefix,omitempty" yaml:"panic_on_task_prefix,omitempty"`
	// WorkMicros is a benchmarking aid: when it is above 0, every
	// verification first spends about that many microseconds of CPU on a
	// fixed computation (chained SHA-256), so that load tests see a server
	// whose handler costs something, as a real verifier does. The amount
	// of computation is calibrated once, in Register, on the machine the
	// server runs on. 0 (the default) adds nothing; the largest accepted
	// value is one second.
	WorkMicros int `json:"work_us,omitempty" yaml:"work_us,omitempty"`
}

// Defaults returns the default configuration, which is the zero value.
func Defaults() Config { return Config{} }

// Validate reports a configuration the server cannot run with.
func (c Config) Validate() error {
	if c.Tolerance < 0 || math.IsNaN(c.Tolerance) || math.IsInf(c.Tolerance, 0) {
		return fmt.Errorf("resources: tolerance must be a finite number >= 0, got %v", c.Tolerance)
	}
	if c.WorkMicros < 0 || c.WorkMicros > maxWorkMicros {
		return fmt.Errorf("resources: work_us must be in [0, %d], got %d", maxWorkMicros, c.WorkMicros)
	}
	return nil
}

// Register validates cfg and registers POST /verify on s.
//
// Answers: 200 with the score for every task that could be scored, right
// or wrong; 400 (from the runtime) for a body that does not decode or a
// task without id or question, not counted as a verification; 500 when
// the task's expected answer is not a number (the error wraps
// ErrExpectedNotNumber; it is a broken task, not a bad request, so it is
// counted as a failed verification) or when the verifier panics.
func Register(s *server.Server, cfg Config) error {
	if s == nil {
		return errors.New("resources: nil server")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	server.Handle(s, protocol.RouteVerify, newVerifier(cfg).handle)
	return nil
}

// newVerifier prepares a valid cfg for serving; with WorkMicros set it
// calibrates the synthetic work, which takes a few milliseconds.
func newVerifier(cfg Config) *verifier {
	v := &verifier{cfg: cfg, workRounds: calibrateWork(cfg.WorkMicros)}
	if cfg.Tolerance > 0 {
		v.tolerance = new(big.Rat).SetFloat64(cfg.Tolerance)
	}
	return v
}

type verifier struct {
	cfg        Config
	tolerance  *big.Rat // nil: exact comparison
	workRounds int      // SHA-256 rounds per verification (Config.WorkMicros); 0: none
}

// handle wraps one verification with its span and its single metric
// record. The runtime has already decoded and validated the request, so
// every call that gets here is counted.
func (v *verifier) handle(ctx context.Context, req protocol.VerifyRequest) (resp protocol.VerifyResponse, err error) {
	start := time.Now()
	var span trace.Span
	if lens.Enabled(telemetry.GroupVerify) {
		_, span = lens.Start(ctx, telemetry.GroupVerify, SpanName,
			trace.WithAttributes(attribute.String(AttrTaskID, req.Task.ID)))
		if id := telemetry.RolloutIDFrom(ctx); id != "" {
			span.SetAttributes(attribute.String(telemetry.AttrRolloutID, id))
		}
	}
	defer func() {
		r := recover()
		if r != nil {
			// Recorded here, then handed on: the runtime logs the panic
			// with its stack (which still shows the original frames) and
			// answers 500. The value stays off the span: it could quote
			// the answer.
			err = errPanicked
		}
		metrics.RecordVerify(time.Since(start), err == nil)
		if span != nil {
			if err == nil {
				span.SetAttributes(attribute.Float64(AttrReward, resp.Reward), attribute.Bool(AttrCorrect, resp.Correct))
			}
			lens.End(span, err)
		}
		if r != nil {
			panic(r)
		}
	}()
	return v.verify(req)
}

// verify scores one answer. It returns an error wrapping
// ErrExpectedNotNumber when the task cannot be scored.
func (v *verifier) verify(req protocol.VerifyRequest) (protocol.VerifyResponse, error) {
	if v.cfg.PanicOnTaskPrefix != "" && strings.HasPrefix(req.Task.ID, v.cfg.PanicOnTaskPrefix) {
		panic("resources: injected verifier fault")
	}
	if v.workRounds > 0 {
		doWork(req.Task.ID, v.workRounds)
	}
	want, ok := parseNumber(strings.TrimSpace(req.Task.Expected))
	if !ok {
		// Neither the expected value nor the answer goes into the message:
		// both are task data, and the message reaches spans.
		return protocol.VerifyResponse{}, fmt.Errorf("task %q: %w", req.Task.ID, ErrExpectedNotNumber)
	}
	tok, found := LastNumber(req.Answer)
	if !found {
		return protocol.VerifyResponse{}, nil
	}
	got, ok := parseNumber(tok)
	if !ok {
		return protocol.VerifyResponse{Parsed: tok}, nil
	}
	resp := protocol.VerifyResponse{Parsed: tok}
	if v.equal(got, want) {
		resp.Reward, resp.Correct = 1, true
	}
	return resp, nil
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
// VerifyResponse.Parsed reports: no separators, no plus sign, a leading
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
