package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math/big"
	randv2 "math/rand/v2"
	"regexp"
	"strings"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/counter"
)

// DontKnow is the built-in policy's answer to a message it cannot parse.
const DontKnow = "I don't know"

// Tool names of the counter environment, which the built-in policy knows
// how to drive.
const (
	// CounterIncrementTool adds its {"count": N} argument to the counter.
	CounterIncrementTool = counter.ToolIncrement
	// CounterValueTool reads the counter; it answers {"count": X}.
	CounterValueTool = counter.ToolGet
)

// Turn is one turn of the built-in policy: a function call to make, or
// else a final text answer.
type Turn struct {
	// Call is the one function call of this turn, or nil.
	Call *ToolCall
	// Text is the answer when Call is nil.
	Text string
}

// ToolCall is a function call the policy makes.
type ToolCall struct {
	// Name is the function's name.
	Name string
	// Arguments is the JSON-encoded argument object.
	Arguments string
}

// Decide is the built-in policy. With the counter tool among tools it
// plans one increment_counter call per "add N" of the last user message
// (then one get_counter_value call, when that tool is offered), makes the
// first call not yet answered by a function_call_output of input, and
// once all are answered reports "The count is X.". Otherwise it answers
// the last user message with Answer. The same arguments always give the
// same turn.
func Decide(seed int64, pCorrect float64, input protocol.Input, tools []protocol.Tool) Turn {
	text := input.LastUserText()
	if hasFunctionTool(tools, CounterIncrementTool) {
		return counterTurn(text, input.AsItems(), hasFunctionTool(tools, CounterValueTool))
	}
	return Turn{Text: Answer(seed, pCorrect, text)}
}

func hasFunctionTool(tools []protocol.Tool, name string) bool {
	for _, t := range tools {
		if t.Type == "function" && t.Name == name {
			return true
		}
	}
	return false
}

// addRE finds the "add N" steps of a counter task.
var addRE = regexp.MustCompile(`(?i)\badd\s+([-+]?\d+)\b`)

// counterTurn plans the counter episode and takes its next step.
func counterTurn(text string, items []protocol.Item, canRead bool) Turn {
	var plan []ToolCall
	sum := new(big.Int)
	for _, m := range addRE.FindAllStringSubmatch(text, -1) {
		if len(m[1]) > 4096 {
			continue
		}
		n, ok := new(big.Int).SetString(strings.TrimPrefix(m[1], "+"), 10)
		if !ok {
			continue
		}
		sum.Add(sum, n)
		plan = append(plan, ToolCall{Name: CounterIncrementTool, Arguments: `{"count": ` + n.String() + `}`})
	}
	if canRead {
		plan = append(plan, ToolCall{Name: CounterValueTool, Arguments: `{}`})
	}
	answered := 0
	reads := map[string]bool{} // call ids of get_counter_value calls
	for _, it := range items {
		switch it.Type {
		case protocol.TypeFunctionCallOutput:
			answered++
		case protocol.TypeFunctionCall:
			if it.Name == CounterValueTool {
				reads[it.CallID] = true
			}
		}
	}
	if answered < len(plan) {
		c := plan[answered]
		return Turn{Call: &c}
	}
	count := sum.String()
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Type != protocol.TypeFunctionCallOutput || !reads[it.CallID] {
			continue
		}
		if n, ok := countOf(it.Output); ok {
			count = n
		}
		break
	}
	return Turn{Text: "The count is " + count + "."}
}

// countOf reads the "count" number of a counter tool's JSON output.
func countOf(output string) (string, bool) {
	var v struct {
		Count json.Number `json:"count"`
	}
	dec := json.NewDecoder(strings.NewReader(output))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || v.Count == "" {
		return "", false
	}
	return v.Count.String(), true
}

// questionRE finds "a op b" with integer operands; whatIsRE prefers the
// one a "What is" introduces.
var (
	questionRE = regexp.MustCompile(`(-?\d+)\s*([-+*])\s*(-?\d+)`)
	whatIsRE   = regexp.MustCompile(`(?i)\bwhat\s+is\s+(-?\d+)\s*([-+*])\s*(-?\d+)`)
)

// Solve finds the arithmetic question of text, "What is A op B?" with op
// one of + - * on integers (else the first "A op B" anywhere), and
// returns its value; ok is false when text holds no such expression.
// Operands of any size are handled exactly.
func Solve(text string) (result *big.Int, ok bool) {
	m := whatIsRE.FindStringSubmatch(text)
	if m == nil {
		m = questionRE.FindStringSubmatch(text)
	}
	// Operands thousands of digits long would cost seconds of CPU.
	if m == nil || len(m[1]) > 4096 || len(m[3]) > 4096 {
		return nil, false
	}
	a, okA := new(big.Int).SetString(m[1], 10)
	b, okB := new(big.Int).SetString(m[3], 10)
	if !okA || !okB {
		return nil, false
	}
	switch m[2] {
	case "+":
		return a.Add(a, b), true
	case "-":
		return a.Sub(a, b), true
	default:
		return a.Mul(a, b), true
	}
}

// Answer is the built-in policy's reply to a question under seed. For an
// arithmetic question (see Solve) it picks the result, correct with
// probability pCorrect and otherwise off by 1 to 10 either way, and
// formats it as the question asks:
//
//	lettered options ("A) 4", "B: 5", "C. 6")  \boxed{L}, L the option equal to the result
//	                                          (answering wrong: the first option not equal)
//	"only the number" (any case)              the number alone
//	"\boxed" anywhere                         The answer is \boxed{N}.
//	otherwise                                 The answer is N.
//
// A question without arithmetic gets DontKnow. The same (seed, question)
// always gets the same reply; the draw uses a generator local to the
// call, seeded from a hash of both, so concurrent calls share no state.
func Answer(seed int64, pCorrect float64, question string) string {
	want, ok := Solve(question)
	if !ok {
		return DontKnow
	}
	right := draw(seed, question) < pCorrect
	if opts := options(question); len(opts) >= 2 {
		return `\boxed{` + pickOption(opts, want.String(), right) + `}`
	}
	got := want
	if !right {
		got = wrong(seed, question, want)
	}
	switch {
	case strings.Contains(strings.ToLower(question), "only the number"):
		return got.String()
	case strings.Contains(question, `\boxed`):
		return `The answer is \boxed{` + got.String() + `}.`
	default:
		return "The answer is " + got.String() + "."
	}
}

// rng is the generator of one (seed, question) pair.
func rng(seed int64, question string) *randv2.Rand {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(question))
	sum := h.Sum64()
	var src randv2.PCG
	src.Seed(sum, sum^0x9e3779b97f4a7c15)
	return randv2.New(&src)
}

// draw is the pair's first number in [0, 1): the answer is right when it
// is below the probability of being right.
func draw(seed int64, question string) float64 { return rng(seed, question).Float64() }

// wrong is the pair's wrong answer: want moved by 1 to 10 either way.
func wrong(seed int64, question string, want *big.Int) *big.Int {
	r := rng(seed, question)
	r.Float64() // the draw
	off := int64(r.IntN(10) + 1)
	if r.IntN(2) == 0 {
		off = -off
	}
	return new(big.Int).Add(want, big.NewInt(off))
}

// option is one lettered option of a question.
type option struct{ letter, text string }

// optionRE finds option markers: a capital letter, then ")", ":" or ".",
// at the start of the text or after a space or an opening parenthesis.
var optionRE = regexp.MustCompile(`(?:^|[\s(\[])([A-Z])[).:]`)

// options returns the lettered options of a question, each option's text
// running to the next marker or the end of its line.
func options(question string) []option {
	locs := optionRE.FindAllStringSubmatchIndex(question, -1)
	out := make([]option, 0, len(locs))
	for i, l := range locs {
		end := len(question)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		text := question[l[1]:end]
		if nl := strings.IndexByte(text, '\n'); nl >= 0 {
			text = text[:nl]
		}
		text = strings.TrimRight(strings.TrimSpace(text), ",;")
		out = append(out, option{letter: question[l[2]:l[3]], text: strings.TrimSpace(text)})
	}
	return out
}

// pickOption is the letter of the option whose text is want, or (when
// answering wrong, or when no option is want) of the first one that is
// not; the first option when every one is want.
func pickOption(opts []option, want string, right bool) string {
	if right {
		for _, o := range opts {
			if o.text == want {
				return o.letter
			}
		}
	}
	for _, o := range opts {
		if o.text != want {
			return o.letter
		}
	}
	return opts[0].letter
}

// countWords counts whitespace-separated words: the servers' rough token
// count.
func countWords(s string) int {
	n, in := 0, false
	for _, c := range s {
		space := c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x85 || c == 0xA0
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// inputWords is the word count of what a model reads: the instructions,
// every message's text, every function call's name and arguments and
// every function call output.
func inputWords(instructions *string, items []protocol.Item) int {
	n := 0
	if instructions != nil {
		n += countWords(*instructions)
	}
	for _, it := range items {
		switch it.Type {
		case protocol.TypeFunctionCall:
			n += countWords(it.Name) + countWords(it.Arguments)
		case protocol.TypeFunctionCallOutput:
			if raw, ok := it.Extra.Get("output"); ok {
				n += countWords(string(bytes.TrimSpace(raw)))
			} else {
				n += countWords(it.Output)
			}
		default:
			n += countWords(it.Text())
		}
	}
	return n
}
