package dataset_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gymlens/gymlens/dataset"
	protocol "github.com/gymlens/gymlens/internal/legacyproto"
)

var questionRE = regexp.MustCompile(`^What is (\d+) ([-+*]) (\d+)\?$`)

// check recomputes a task's answer from its question.
func check(t *testing.T, task protocol.Task) {
	t.Helper()
	m := questionRE.FindStringSubmatch(task.Question)
	if m == nil {
		t.Fatalf("%s: question %q has an unexpected shape", task.ID, task.Question)
	}
	a, _ := strconv.ParseInt(m[1], 10, 64)
	b, _ := strconv.ParseInt(m[3], 10, 64)
	var want int64
	switch m[2] {
	case "+":
		want = a + b
	case "-":
		want = a - b
		if want < 0 {
			t.Fatalf("%s: %q goes below zero", task.ID, task.Question)
		}
	case "*":
		want = a * b
	}
	if task.Expected != strconv.FormatInt(want, 10) {
		t.Fatalf("%s: %q expects %q, want %d", task.ID, task.Question, task.Expected, want)
	}
}

func TestArithmetic(t *testing.T) {
	tasks := dataset.Arithmetic(500, 7)
	if len(tasks) != 500 {
		t.Fatalf("got %d tasks, want 500", len(tasks))
	}
	if tasks[0].ID != "arith-000001" || tasks[499].ID != "arith-000500" {
		t.Fatalf("ids %q .. %q", tasks[0].ID, tasks[499].ID)
	}
	ops := map[string]int{}
	questions := map[string]bool{}
	for i, task := range tasks {
		if want := fmt.Sprintf("arith-%06d", i+1); task.ID != want {
			t.Fatalf("task %d has id %q, want %q", i, task.ID, want)
		}
		if err := task.Validate(); err != nil {
			t.Fatal(err)
		}
		check(t, task)
		if questions[task.Question] {
			t.Fatalf("question %q repeats", task.Question)
		}
		questions[task.Question] = true
		m := questionRE.FindStringSubmatch(task.Question)
		ops[m[2]]++
		for _, operand := range []string{m[1], m[3]} {
			if n, _ := strconv.Atoi(operand); n < 1 || n > 99 {
				t.Fatalf("operand %d of %q is not small", n, task.Question)
			}
		}
	}
	for _, op := range []string{"+", "-", "*"} {
		if ops[op] == 0 {
			t.Fatalf("no %q question among 500: %v", op, ops)
		}
	}
}

func TestArithmeticReproducible(t *testing.T) {
	a, b := dataset.Arithmetic(200, 42), dataset.Arithmetic(200, 42)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave different tasks")
	}
	if c := dataset.Arithmetic(200, 43); slices.Equal(a, c) {
		t.Fatal("different seeds gave the same tasks")
	}
	// Pinned values: a change here changes every stored dataset.
	pinned := []protocol.Task{
		{ID: "arith-000001", Question: "What is 87 + 53?", Expected: "140"},
		{ID: "arith-000002", Question: "What is 30 * 85?", Expected: "2550"},
		{ID: "arith-000003", Question: "What is 1 + 4?", Expected: "5"},
	}
	if got := dataset.Arithmetic(3, 1); !slices.Equal(got, pinned) {
		t.Fatalf("seed 1 gave %v, want %v", got, pinned)
	}
	if prefix := dataset.Arithmetic(3, 42); !slices.Equal(prefix, a[:3]) {
		t.Fatal("a shorter dataset is not a prefix of a longer one with the same seed")
	}
}

func TestArithmeticEdges(t *testing.T) {
	if got := dataset.Arithmetic(0, 1); len(got) != 0 {
		t.Fatalf("n=0 gave %d tasks", len(got))
	}
	if got := dataset.Arithmetic(-5, 1); len(got) != 0 {
		t.Fatalf("n<0 gave %d tasks", len(got))
	}
	// More tasks than two-digit operands allow: still distinct and correct.
	tasks := dataset.Arithmetic(30000, -3)
	seen := make(map[string]bool, len(tasks))
	for _, task := range tasks {
		if seen[task.Question] {
			t.Fatalf("question %q repeats", task.Question)
		}
		seen[task.Question] = true
		check(t, task)
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	tasks := append(dataset.Arithmetic(20, 5), protocol.Task{ID: "odd", Question: `Is 1 < 2 & "yes"?`, Expected: ""})
	var buf bytes.Buffer
	if err := dataset.WriteJSONL(&buf, tasks); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(tasks) {
		t.Fatalf("%d lines for %d tasks", n, len(tasks))
	}
	if !strings.Contains(buf.String(), `"question":"Is 1 < 2 & \"yes\"?"`) {
		t.Fatalf("HTML escaping or bad quoting in %q", buf.String())
	}
	got, err := dataset.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, tasks) {
		t.Fatalf("round trip changed the tasks:\n got %v\nwant %v", got, tasks)
	}
}

func TestReadJSONLTolerates(t *testing.T) {
	long := strings.Repeat("x", 200_000) // longer than bufio.Scanner's default line limit
	in := "\n" +
		`{"id":"a","question":"q1","expected":"1"}` + "\r\n" +
		"   \t\n" +
		`{"id":"b","question":"` + long + `","extra":{"ignored":true}}` + "\n" +
		`  {"id":"c","question":"q3"}` // no trailing newline
	got, err := dataset.ReadJSONL(iotest.OneByteReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Task{{ID: "a", Question: "q1", Expected: "1"}, {ID: "b", Question: long}, {ID: "c", Question: "q3"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d tasks %v", len(got), got)
	}
	if got, err := dataset.ReadJSONL(strings.NewReader("")); err != nil || len(got) != 0 {
		t.Fatalf("empty input: %v, %v", got, err)
	}
}

func TestReadJSONLErrors(t *testing.T) {
	ok := `{"id":"a","question":"q"}`
	for name, tc := range map[string]struct{ in, want string }{
		"bad json":         {ok + "\n\n{\"id\":\n", "line 3:"},
		"trailing data":    {ok + " {}\n", "line 1:"},
		"not an object":    {"[1,2]\n", "line 1:"},
		"missing id":       {ok + "\n" + `{"question":"q"}`, "line 2: task.id is required"},
		"missing question": {`{"id":"x","question":"  "}`, "line 1: task.question is required"},
		"null":             {"null\n", "line 1: task.id is required"},
		"duplicate":        {ok + "\n" + `{"id":"b","question":"q"}` + "\n\n" + ok + "\n", `line 4: duplicate task id "a" (first on line 1)`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := dataset.ReadJSONL(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if got != nil {
				t.Fatalf("tasks returned alongside an error: %v", got)
			}
		})
	}
	boom := errors.New("disk on fire")
	_, err := dataset.ReadJSONL(iotest.ErrReader(boom))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("read error = %v", err)
	}
}

func TestWriteJSONLRefusesBadTasks(t *testing.T) {
	for name, tasks := range map[string][]protocol.Task{
		"invalid":   {{ID: "a", Question: "q"}, {ID: "", Question: "q"}},
		"duplicate": {{ID: "a", Question: "q"}, {ID: "a", Question: "r"}},
	} {
		var buf bytes.Buffer
		err := dataset.WriteJSONL(&buf, tasks)
		if err == nil || !strings.Contains(err.Error(), "task 2") {
			t.Fatalf("%s: err = %v", name, err)
		}
		if buf.Len() != 0 {
			t.Fatalf("%s: wrote %q before refusing", name, buf.String())
		}
	}
	var w failWriter
	if err := dataset.WriteJSONL(&w, dataset.Arithmetic(3, 1)); err == nil {
		t.Fatal("write error not reported")
	}
}

type failWriter struct{}

func (*failWriter) Write([]byte) (int, error) { return 0, errors.New("no space") }

func ExampleArithmetic() {
	for _, task := range dataset.Arithmetic(3, 1) {
		fmt.Println(task.ID, task.Question, task.Expected)
	}
	// Output:
	// arith-000001 What is 87 + 53? 140
	// arith-000002 What is 30 * 85? 2550
	// arith-000003 What is 1 + 4? 5
}
