package dataset_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/counter"
)

var questionRE = regexp.MustCompile(`^What is (\d+) ([-+*]) (\d+)\?`)

// text returns the row's prompt.
func text(row protocol.RunRequest) string { return row.ResponsesCreateParams.Input.LastUserText() }

// field decodes a task field, failing the test when it is missing.
func field[T any](t *testing.T, row protocol.RunRequest, key string) T {
	t.Helper()
	var v T
	if ok, err := row.Fields.Decode(key, &v); !ok || err != nil {
		t.Fatalf("row %s: field %s: present %v, %v", encode(t, row), key, ok, err)
	}
	return v
}

func encode(t *testing.T, row protocol.RunRequest) string {
	t.Helper()
	b, err := row.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// solve recomputes the answer of the arithmetic question a prompt starts
// with.
func solve(t *testing.T, prompt string) int64 {
	t.Helper()
	m := questionRE.FindStringSubmatch(prompt)
	if m == nil {
		t.Fatalf("prompt %q has an unexpected shape", prompt)
	}
	a, _ := strconv.ParseInt(m[1], 10, 64)
	b, _ := strconv.ParseInt(m[3], 10, 64)
	switch m[2] {
	case "+":
		return a + b
	case "-":
		if a < b {
			t.Fatalf("%q goes below zero", prompt)
		}
		return a - b
	}
	return a * b
}

// checkRow asserts what every generated row satisfies: it validates, it
// survives a JSON round trip unchanged, and the default agent runs it.
func checkRow(t *testing.T, row protocol.RunRequest) {
	t.Helper()
	if err := dataset.CheckRow(&row); err != nil {
		t.Fatalf("row %s: %v", encode(t, row), err)
	}
	line := encode(t, row)
	var back protocol.RunRequest
	if err := json.Unmarshal([]byte(line), &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("decoded row %s: %v", line, err)
	}
	if again := encode(t, back); again != line {
		t.Fatalf("round trip changed the row:\n%s\n%s", line, again)
	}
	if row.AgentRef == nil || *row.AgentRef != (protocol.ServerRef{Type: contract.ServerTypeAgent, Name: dataset.DefaultAgent}) {
		t.Fatalf("agent_ref %+v", row.AgentRef)
	}
	if row.TaskIndex != nil || row.RolloutIndex != nil || row.AttemptIndex != nil || row.RolloutID != "" {
		t.Fatalf("row carries collector bookkeeping: %s", line)
	}
}

func TestArithmetic(t *testing.T) {
	rows := dataset.Arithmetic(500, 7)
	if len(rows) != 500 {
		t.Fatalf("got %d rows, want 500", len(rows))
	}
	ops := map[string]int{}
	seen := map[string]bool{}
	for i, row := range rows {
		checkRow(t, row)
		q := text(row)
		if want := strconv.FormatInt(solve(t, q), 10); field[string](t, row, "expected_answer") != want {
			t.Fatalf("%q expects %q, want %s", q, field[string](t, row, "expected_answer"), want)
		}
		if seen[q] {
			t.Fatalf("question %q repeats", q)
		}
		seen[q] = true
		m := questionRE.FindStringSubmatch(q)
		ops[m[2]]++
		for _, operand := range []string{m[1], m[3]} {
			if n, _ := strconv.Atoi(operand); n < 1 || n > 99 {
				t.Fatalf("operand %d of %q is not small", n, q)
			}
		}
		if want := fmt.Sprintf("arith-%06d", i+1); len(row.Fields) != 2 || field[string](t, row, "task_id") != want {
			t.Fatalf("task fields %s, want task_id %s and expected_answer only", encode(t, row), want)
		}
	}
	for _, op := range []string{"+", "-", "*"} {
		if ops[op] == 0 {
			t.Fatalf("no %q question among 500: %v", op, ops)
		}
	}
}

func TestArithmeticReproducible(t *testing.T) {
	same := func(a, b []protocol.RunRequest) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if encode(t, a[i]) != encode(t, b[i]) {
				return false
			}
		}
		return true
	}
	a := dataset.Arithmetic(200, 42)
	if !same(a, dataset.Arithmetic(200, 42)) {
		t.Fatal("the same seed gave different rows")
	}
	if same(a, dataset.Arithmetic(200, 43)) {
		t.Fatal("different seeds gave the same rows")
	}
	if !same(dataset.Arithmetic(3, 42), a[:3]) {
		t.Fatal("a shorter dataset is not a prefix of a longer one with the same seed")
	}
	// Pinned: a change here changes every stored dataset.
	pinned := []string{
		`{"responses_create_params":{"input":[{"role":"user","content":"What is 87 + 53?"}]},"agent_ref":{"type":"responses_api_agents","name":"simple_agent"},"task_id":"arith-000001","expected_answer":"140"}`,
		`{"responses_create_params":{"input":[{"role":"user","content":"What is 30 * 85?"}]},"agent_ref":{"type":"responses_api_agents","name":"simple_agent"},"task_id":"arith-000002","expected_answer":"2550"}`,
		`{"responses_create_params":{"input":[{"role":"user","content":"What is 1 + 4?"}]},"agent_ref":{"type":"responses_api_agents","name":"simple_agent"},"task_id":"arith-000003","expected_answer":"5"}`,
	}
	for i, row := range dataset.Arithmetic(3, 1) {
		if got := encode(t, row); got != pinned[i] {
			t.Errorf("seed 1 row %d:\n got %s\nwant %s", i, got, pinned[i])
		}
	}
}

func TestArithmeticEdges(t *testing.T) {
	if got := dataset.Arithmetic(0, 1); len(got) != 0 {
		t.Fatalf("n=0 gave %d rows", len(got))
	}
	if got := dataset.Arithmetic(-5, 1); len(got) != 0 {
		t.Fatalf("n<0 gave %d rows", len(got))
	}
	// More rows than two-digit operands allow: still distinct and correct.
	rows := dataset.Arithmetic(30000, -3)
	seen := make(map[string]bool, len(rows))
	for _, row := range rows {
		q := text(row)
		if seen[q] {
			t.Fatalf("question %q repeats", q)
		}
		seen[q] = true
		if field[string](t, row, "expected_answer") != strconv.FormatInt(solve(t, q), 10) {
			t.Fatalf("%q has a wrong answer", q)
		}
	}
}

// Every environment's generator asks Arithmetic's questions (or, for the
// counter, its own), in the wording the built-in policy recognises.
func TestEnvironmentDatasets(t *testing.T) {
	const n, seed = 200, 5
	base := dataset.Arithmetic(n, seed)
	t.Run("string_match", func(t *testing.T) {
		for i, row := range dataset.StringMatch(n, seed) {
			checkRow(t, row)
			if want := text(base[i]) + ` Answer in \boxed{}.`; text(row) != want {
				t.Fatalf("prompt %q, want %q", text(row), want)
			}
			if field[string](t, row, "expected_answer") != field[string](t, base[i], "expected_answer") ||
				field[string](t, row, "extraction_mode") != "boxed" {
				t.Fatalf("row %s", encode(t, row))
			}
		}
	})
	t.Run("equivalence", func(t *testing.T) {
		for i, row := range dataset.Equivalence(n, seed) {
			checkRow(t, row)
			if want := text(base[i]) + " Reply with only the number."; text(row) != want {
				t.Fatalf("prompt %q, want %q", text(row), want)
			}
			if field[string](t, row, "expected_answer") != field[string](t, base[i], "expected_answer") {
				t.Fatalf("row %s", encode(t, row))
			}
		}
	})
	t.Run("mcqa", func(t *testing.T) {
		optionRE := regexp.MustCompile(`(?m)^([A-D])\) (\d+)$`)
		positions := map[string]int{}
		for i, row := range dataset.MCQA(n, seed) {
			checkRow(t, row)
			prompt := text(row)
			if !strings.HasPrefix(prompt, text(base[i])+"\n") || !strings.HasSuffix(prompt, `in \boxed{}.`) {
				t.Fatalf("prompt %q", prompt)
			}
			options := field[[]map[string]string](t, row, "options")
			lines := optionRE.FindAllStringSubmatch(prompt, -1)
			if len(options) != 4 || len(lines) != 4 {
				t.Fatalf("options %v, lines %q", options, lines)
			}
			want := strconv.FormatInt(solve(t, prompt), 10)
			letter := field[string](t, row, "expected_answer")
			values := map[string]bool{}
			for j, opt := range options {
				l, v := lines[j][1], lines[j][2]
				if len(opt) != 1 || opt[l] != v || l != string(rune('A'+j)) {
					t.Fatalf("option %d %v does not match prompt line %q", j, opt, lines[j][0])
				}
				if values[v] {
					t.Fatalf("option value %s repeats in %q", v, prompt)
				}
				values[v] = true
				if (v == want) != (l == letter) {
					t.Fatalf("option %s) %s, result %s, expected_answer %s", l, v, want, letter)
				}
			}
			positions[letter]++
		}
		if len(positions) != 4 {
			t.Fatalf("the right answer sits only at %v", positions)
		}
	})
	t.Run("counter", func(t *testing.T) {
		promptRE := regexp.MustCompile(`^add (\d+) then add (\d+) then get the count$`)
		seen := map[string]bool{}
		for _, row := range dataset.Counter(n, seed) {
			checkRow(t, row)
			line := encode(t, row)
			if seen[line] {
				t.Fatalf("row %s repeats", line)
			}
			seen[line] = true
			m := promptRE.FindStringSubmatch(text(row))
			if m == nil {
				t.Fatalf("prompt %q", text(row))
			}
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[2])
			initial := field[int](t, row, "initial_count")
			if initial < 0 || field[int](t, row, "expected_count") != initial+a+b {
				t.Fatalf("row %s", line)
			}
			tools := row.ResponsesCreateParams.Tools
			if len(tools) != 2 || tools[0].Name != counter.ToolIncrement || tools[1].Name != counter.ToolGet {
				t.Fatalf("tools %s", line)
			}
			for _, tool := range tools {
				if tool.Type != "function" || tool.Strict == nil || !*tool.Strict || tool.Description == nil || *tool.Description == "" {
					t.Fatalf("tool %+v", tool)
				}
				var schema struct {
					Type       string                     `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				}
				if err := json.Unmarshal(tool.Parameters, &schema); err != nil || schema.Type != "object" {
					t.Fatalf("tool %s parameters %s: %v", tool.Name, tool.Parameters, err)
				}
				if tool.Name == counter.ToolIncrement && (len(schema.Required) != 1 || schema.Required[0] != "count" || schema.Properties["count"] == nil) {
					t.Fatalf("increment_counter schema %s", tool.Parameters)
				}
			}
		}
		if got := dataset.Counter(0, 1); got != nil {
			t.Fatalf("n=0: %v", got)
		}
		if rows := dataset.Counter(20000, 1); len(rows) != 20000 {
			t.Fatalf("%d rows", len(rows))
		}
	})
}

func TestAgentName(t *testing.T) {
	rows := rowsOf(t,
		`{"responses_create_params":{"input":"q"},"agent_ref":{"type":"responses_api_agents","name":"a"}}`,
		`{"responses_create_params":{"input":"q"},"agent_ref":{"name":"b"}}`,
		`{"responses_create_params":{"input":"q"},"agent_ref":{"type":"responses_api_agents","name":"c","extra":1}}`,
		`{"responses_create_params":{"input":"q"},"agent_ref":{"type":"responses_api_agents"}}`,
		`{"responses_create_params":{"input":"q"},"agent_ref":null}`,
		`{"responses_create_params":{"input":"q"}}`,
	)
	for i, want := range []struct {
		name    string
		present bool
	}{{"a", true}, {"b", true}, {"c", true}, {"", true}, {"", false}, {"", false}} {
		name, present, err := dataset.AgentName(&rows[i])
		if err != nil || name != want.name || present != want.present {
			t.Errorf("row %d: %q, %v, %v; want %q, %v", i+1, name, present, err, want.name, want.present)
		}
	}
	// The row keeps its agent_ref as it came.
	if got := encode(t, rows[1]); !strings.Contains(got, `"agent_ref":{"name":"b"}`) {
		t.Errorf("row 2 encodes as %s", got)
	}
}

func rowsOf(t *testing.T, lines ...string) []protocol.RunRequest {
	t.Helper()
	rows, err := dataset.ReadRows(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestWithAgent(t *testing.T) {
	rows := dataset.WithAgent(dataset.StringMatch(3, 1), "string_match_simple_agent")
	for _, row := range rows {
		if !strings.Contains(encode(t, row), `"agent_ref":{"type":"responses_api_agents","name":"string_match_simple_agent"}`) {
			t.Fatalf("row %s", encode(t, row))
		}
	}
}

func TestRowsRoundTrip(t *testing.T) {
	rows := append(dataset.Counter(5, 2), dataset.MCQA(5, 2)...)
	odd := dataset.Arithmetic(1, 9)[0]
	odd.ResponsesCreateParams.Input = protocol.TextInput(`Is 1 < 2 & "yes"?`)
	odd.Fields.Set("meta", map[string]any{"nested": []int{1, 2}})
	rows = append(rows, odd)
	var buf bytes.Buffer
	if err := dataset.WriteRows(&buf, rows); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(rows) {
		t.Fatalf("%d lines for %d rows", n, len(rows))
	}
	got, err := dataset.ReadRows(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows back, want %d", len(got), len(rows))
	}
	for i := range rows {
		if a, b := encode(t, rows[i]), encode(t, got[i]); a != b {
			t.Fatalf("row %d changed:\n%s\n%s", i, a, b)
		}
	}
}

func TestReadRowsTolerates(t *testing.T) {
	long := strings.Repeat("x", 200_000) // longer than bufio.Scanner's default line limit
	in := "\n" +
		`{"responses_create_params":{"input":"q1"},"expected_answer":"1"}` + "\r\n" +
		"   \t\n" +
		`{"responses_create_params":{"input":[{"role":"user","content":"` + long + `"}]},"extra":{"kept":true},"_ng_task_index":7}` + "\n" +
		`  {"responses_create_params":{"input":"q3"},"agent_ref":{"type":"responses_api_agents","name":"a"},"_ng_rollout_id":"r.1"}` // no trailing newline
	got, err := dataset.ReadRows(iotest.OneByteReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d rows", len(got))
	}
	if text(got[0]) != "q1" || field[string](t, got[0], "expected_answer") != "1" {
		t.Fatalf("row 1 %s", encode(t, got[0]))
	}
	if text(got[1]) != long || *got[1].TaskIndex != 7 || string(must(got[1].Fields.Get("extra"))) != `{"kept":true}` {
		t.Fatalf("row 2 lost members")
	}
	if got[2].AgentRef.Name != "a" || got[2].RolloutID != "r.1" {
		t.Fatalf("row 3 %s", encode(t, got[2]))
	}
	if got, err := dataset.ReadRows(strings.NewReader("")); err != nil || len(got) != 0 {
		t.Fatalf("empty input: %v, %v", got, err)
	}
}

func must(raw json.RawMessage, ok bool) json.RawMessage {
	if !ok {
		return nil
	}
	return raw
}

func TestReadRowsErrors(t *testing.T) {
	ok := `{"responses_create_params":{"input":"q"}}`
	for name, tc := range map[string]struct{ in, want string }{
		"bad json":         {ok + "\n\n{\"responses_create_params\":\n", "line 3:"},
		"trailing data":    {ok + " {}\n", "line 1:"},
		"not an object":    {"[1,2]\n", "line 1:"},
		"null":             {ok + "\nnull\n", "line 2:"},
		"no params":        {ok + "\n" + `{"expected_answer":"1"}`, "line 2: validation error: responses_create_params: Field required"},
		"no input":         {`{"responses_create_params":{"temperature":0.5}}`, "line 1: validation error: responses_create_params.input: Field required"},
		"forbidden param":  {`{"responses_create_params":{"input":"q","frequency_penalty":0.5}}`, "responses_create_params.frequency_penalty: Extra inputs are not permitted"},
		"bad item":         {`{"responses_create_params":{"input":[{"type":"function_call"}]}}`, "line 1: "},
		"bad rollout id":   {ok + "\n" + `{"responses_create_params":{"input":"q"},"_ng_rollout_id":"-x"}`, "line 2: _ng_rollout_id"},
		"wrong agent kind": {`{"responses_create_params":{"input":"q"},"agent_ref":"simple_agent"}`, "line 1: agent_ref must be an object"},
		"agent name kind":  {`{"responses_create_params":{"input":"q"},"agent_ref":{"name":7}}`, "line 1: agent_ref must be an object"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := dataset.ReadRows(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if got != nil {
				t.Fatalf("rows returned alongside an error: %v", got)
			}
		})
	}
	var verr *protocol.ValidationError
	if _, err := dataset.ReadRows(strings.NewReader(`{"responses_create_params":{}}`)); !errors.As(err, &verr) {
		t.Fatalf("a schema violation is not a *protocol.ValidationError: %v", err)
	}
	boom := errors.New("disk on fire")
	_, err := dataset.ReadRows(iotest.ErrReader(boom))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("read error = %v", err)
	}
}

func TestWriteRowsRefusesBadRows(t *testing.T) {
	good := dataset.Arithmetic(2, 1)
	var noInput protocol.RunRequest
	if err := json.Unmarshal([]byte(`{"responses_create_params":{}}`), &noInput); err != nil {
		t.Fatal(err)
	}
	badID := dataset.Arithmetic(1, 1)[0]
	badID.RolloutID = "bad id"
	for name, rows := range map[string][]protocol.RunRequest{
		"no input":       {good[0], noInput},
		"bad rollout id": {good[0], badID},
	} {
		var buf bytes.Buffer
		err := dataset.WriteRows(&buf, rows)
		if err == nil || !strings.Contains(err.Error(), "row 2") {
			t.Fatalf("%s: err = %v", name, err)
		}
		if buf.Len() != 0 {
			t.Fatalf("%s: wrote %q before refusing", name, buf.String())
		}
	}
	if err := dataset.WriteRows(failWriter{}, good); err == nil {
		t.Fatal("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space") }

func ExampleArithmetic() {
	for _, row := range dataset.Arithmetic(3, 1) {
		var want string
		_, _ = row.Fields.Decode("expected_answer", &want)
		fmt.Println(row.ResponsesCreateParams.Input.LastUserText(), want)
	}
	// Output:
	// What is 87 + 53? 140
	// What is 30 * 85? 2550
	// What is 1 + 4? 5
}

func ExampleWriteRows() {
	if err := dataset.WriteRows(os.Stdout, dataset.StringMatch(1, 1)); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"responses_create_params":{"input":[{"role":"user","content":"What is 87 + 53? Answer in \\boxed{}."}]},"agent_ref":{"type":"responses_api_agents","name":"simple_agent"},"expected_answer":"140","extraction_mode":"boxed"}
}
