package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/model"
)

func questions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("What is %d + %d?", 3*i+1, 7*i+2)
	}
	return out
}

func TestBuiltinIsDeterministicPerSeed(t *testing.T) {
	baseA, c, _ := start(t, withP(1, 0.5), server.Options{})
	baseA2, _, _ := start(t, withP(1, 0.5), server.Options{}) // same seed, another process-like instance
	baseB, _, _ := start(t, withP(2, 0.5), server.Options{})
	urlA, urlA2, urlB := responsesURL(baseA), responsesURL(baseA2), responsesURL(baseB)
	differ, right := 0, 0
	for i, q := range questions(50) {
		a := mustAsk(t, c, urlA, q)
		if again := mustAsk(t, c, urlA, q); again != a {
			t.Fatalf("%q: %q then %q under the same seed", q, a, again)
		}
		if other := mustAsk(t, c, urlA2, q); other != a {
			t.Fatalf("%q: two servers with seed 1 answered %q and %q", q, a, other)
		}
		if a != model.Answer(1, 0.5, q) {
			t.Fatalf("%q: server %q, Answer %q", q, a, model.Answer(1, 0.5, q))
		}
		if a == fmt.Sprintf("The answer is %d.", (3*i+1)+(7*i+2)) {
			right++
		}
		if mustAsk(t, c, urlB, q) != a {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("seeds 1 and 2 gave the same answers to all 50 questions")
	}
	if right == 0 || right == 50 {
		t.Errorf("p=0.5 was right %d times in 50", right)
	}
}

func TestCorrectProbabilityExtremes(t *testing.T) {
	right, c, _ := start(t, withP(7, 1), server.Options{})
	wrong, _, _ := start(t, withP(7, 0), server.Options{})
	for i, q := range questions(50) {
		want := fmt.Sprintf("The answer is %d.", (3*i+1)+(7*i+2))
		if got := mustAsk(t, c, responsesURL(right), q); got != want {
			t.Errorf("p=1, %q: %q, want %q", q, got, want)
		}
		got := mustAsk(t, c, responsesURL(wrong), q)
		if got == want || !strings.HasPrefix(got, "The answer is ") {
			t.Errorf("p=0, %q: %q, want a wrong number", q, got)
		}
	}
}

func TestBuiltinParsesOperators(t *testing.T) {
	base, c, _ := start(t, withP(0, 1), server.Options{})
	url := responsesURL(base)
	for q, want := range map[string]string{
		"What is 17 + 25?":                  "The answer is 42.",
		"What is 17 - 25?":                  "The answer is -8.",
		"What is 6 * 7?":                    "The answer is 42.",
		"what is 12*-3":                     "The answer is -36.",
		"Compute 10 - -5, please.":          "The answer is 15.",
		"Step 1-2: What is 4 * 5?":          "The answer is 20.",
		"What is 99999999999 * 99999999999": "The answer is 9999999999800000000001.",
		"What is the capital of France?":    model.DontKnow,
		"What is 5 / 2?":                    model.DontKnow,
	} {
		if got := mustAsk(t, c, url, q); got != want {
			t.Errorf("%q: %q, want %q", q, got, want)
		}
	}
	// The last user message is the one answered, in either content form.
	resp, err := ask(context.Background(), t, c, url, protocol.ResponseCreateParams{Input: protocol.ItemsInput(
		protocol.Item{Role: protocol.RoleSystem, Content: &protocol.Content{Text: "You add numbers. 1 + 1 is a warm-up."}},
		protocol.Item{Type: protocol.TypeMessage, Role: protocol.RoleUser, Content: &protocol.Content{Parts: []protocol.Part{
			{Type: protocol.PartInputText, Text: "What is 1 + 2?"}}}},
		protocol.Item{Role: protocol.RoleAssistant, Content: &protocol.Content{Text: "Let me think about 5 + 5."}},
	)})
	if err != nil || resp.OutputText() != "The answer is 3." {
		t.Errorf("multi-message input: %q, %v", resp.OutputText(), err)
	}
}

// TestArithmeticFormats checks each answer format, answering right
// (p=1) and wrong (p=0).
func TestArithmeticFormats(t *testing.T) {
	right, c, _ := start(t, withP(3, 1), server.Options{})
	wrong, _, _ := start(t, withP(3, 0), server.Options{})
	number := regexp.MustCompile(`^-?\d+$`)
	for _, tc := range []struct {
		name, question, right string
		wrong                 func(string) bool
	}{
		{"letter options with parentheses", "What is 2 + 3?\nA) 4\nB) 5\nC) 6\nAnswer with the letter in \\boxed{}.", `\boxed{B}`,
			func(s string) bool { return s == `\boxed{A}` }},
		{"letter options with colons", "What is 2 * 3? Options: A: 6, B: 5, C: 7", `\boxed{A}`,
			func(s string) bool { return s == `\boxed{B}` }},
		{"letter options with dots", "What is 10 - 4?\nA. 5\nB. 7\nC. 6\nD. 8", `\boxed{C}`,
			func(s string) bool { return s == `\boxed{A}` }},
		{"only the number", "What is 7 + 8? Reply with ONLY the number.", "15",
			func(s string) bool { return number.MatchString(s) && s != "15" }},
		{"boxed", "What is 7 * 8? Put the final answer in \\boxed{}.", `The answer is \boxed{56}.`,
			func(s string) bool {
				return strings.HasPrefix(s, `The answer is \boxed{`) && strings.HasSuffix(s, `}.`) && s != `The answer is \boxed{56}.`
			}},
		{"plain", "What is 9 - 11?", "The answer is -2.",
			func(s string) bool { return strings.HasPrefix(s, "The answer is ") && s != "The answer is -2." }},
		{"no arithmetic", "Name a prime.\nA) 4\nB) 5", model.DontKnow, func(s string) bool { return s == model.DontKnow }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustAsk(t, c, responsesURL(right), tc.question); got != tc.right {
				t.Errorf("right: %q, want %q", got, tc.right)
			}
			if got := mustAsk(t, c, responsesURL(wrong), tc.question); !tc.wrong(got) {
				t.Errorf("wrong: %q", got)
			}
			if got := model.Answer(3, 1, tc.question); got != tc.right {
				t.Errorf("Answer: %q, want %q", got, tc.right)
			}
		})
	}
}

var counterSchema = json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}`)

func counterTools(withRead bool) []protocol.Tool {
	tools := []protocol.Tool{protocol.FunctionTool(model.CounterIncrementTool, "Add count to the counter.", counterSchema)}
	if withRead {
		tools = append(tools, protocol.FunctionTool(model.CounterValueTool, "Read the counter.",
			json.RawMessage(`{"type":"object","properties":{}}`)))
	}
	return tools
}

// runCounter drives a counter episode against the server turn by turn,
// as the agent would: each function call is executed on a local counter
// that starts at initial, and its output appended to the input, until
// the model answers with a message. It returns the calls made (name and
// arguments) and the final text.
func runCounter(t *testing.T, c *server.Client, url, prompt string, initial int, tools []protocol.Tool) (calls []string, final string) {
	t.Helper()
	counter := initial
	input := []protocol.Item{protocol.UserMessage(prompt)}
	for turn := 0; turn < 10; turn++ {
		resp, err := ask(context.Background(), t, c, url, protocol.ResponseCreateParams{
			Input: protocol.ItemsInput(input...), Tools: tools})
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if len(resp.Output) != 1 {
			t.Fatalf("turn %d: %d output items, want exactly one", turn, len(resp.Output))
		}
		if resp.HasAssistantMessage() {
			return calls, resp.OutputText()
		}
		fc := resp.FunctionCalls()
		if len(fc) != 1 || fc[0].CallID == "" || fc[0].ID == "" {
			t.Fatalf("turn %d: output %+v, want one function call with ids", turn, resp.Output)
		}
		call := fc[0]
		var args map[string]json.Number
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			t.Fatalf("turn %d: arguments %q are not a JSON object: %v", turn, call.Arguments, err)
		}
		calls = append(calls, call.Name+" "+call.Arguments)
		out := ""
		switch call.Name {
		case model.CounterIncrementTool:
			n, err := strconv.Atoi(args["count"].String())
			if err != nil {
				t.Fatalf("turn %d: count %q", turn, args["count"])
			}
			counter += n
			out = `{"success": true}`
		case model.CounterValueTool:
			out = fmt.Sprintf(`{"count": %d}`, counter)
		default:
			t.Fatalf("turn %d: unknown tool %q", turn, call.Name)
		}
		input = append(input, call, protocol.FunctionCallOutput(call.CallID, out))
	}
	t.Fatal("no final message after 10 turns")
	return nil, ""
}

func TestCounterEpisode(t *testing.T) {
	base, c, _ := start(t, withP(0, 0), server.Options{}) // arithmetic odds do not touch the counter
	url := responsesURL(base)
	calls, final := runCounter(t, c, url, "The counter starts at 3. Add 1, then add 2. What is the count now?", 3, counterTools(true))
	want := []string{`increment_counter {"count": 1}`, `increment_counter {"count": 2}`, `get_counter_value {}`}
	if strings.Join(calls, "|") != strings.Join(want, "|") || final != "The count is 6." {
		t.Errorf("calls %q, final %q; want %q then %q", calls, final, want, "The count is 6.")
	}

	// Without the read tool the policy reports the sum of its steps.
	calls, final = runCounter(t, c, url, "ADD 4 and add -1.", 0, counterTools(false))
	if strings.Join(calls, "|") != `increment_counter {"count": 4}|increment_counter {"count": -1}` || final != "The count is 3." {
		t.Errorf("without get_counter_value: calls %q, final %q", calls, final)
	}

	// Nothing to add: read, then report.
	calls, final = runCounter(t, c, url, "What is on the counter?", 11, counterTools(true))
	if strings.Join(calls, "|") != `get_counter_value {}` || final != "The count is 11." {
		t.Errorf("read only: calls %q, final %q", calls, final)
	}

	// A string input is the first turn of the same plan.
	resp, err := ask(context.Background(), t, c, url, protocol.ResponseCreateParams{
		Input: protocol.TextInput("add 5"), Tools: counterTools(true)})
	if err != nil || len(resp.FunctionCalls()) != 1 || resp.FunctionCalls()[0].Arguments != `{"count": 5}` {
		t.Errorf("string input: %+v, %v", resp.Output, err)
	}
}
