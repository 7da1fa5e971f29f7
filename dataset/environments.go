package dataset

import (
	"strconv"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/counter"
	"github.com/gymlens/gymlens/servers/resources/equivalence"
	"github.com/gymlens/gymlens/servers/resources/mcqa"
	"github.com/gymlens/gymlens/servers/resources/stringmatch"
)

// StringMatch returns n rows for the string_match environment: the
// questions of Arithmetic(n, seed) as the environment's own rows
// (stringmatch.Row) write them, each followed by "Answer in \boxed{}.",
// with the result as expected_answer and extraction_mode "boxed".
func StringMatch(n int, seed int64) []protocol.RunRequest {
	qs := questions(n, seed)
	rows := make([]protocol.RunRequest, len(qs))
	for i, q := range qs {
		rows[i] = withDefaultAgent(stringmatch.Row(q.text, q.answer()))
	}
	return rows
}

// mcqaOptions is the number of options of an MCQA row.
const mcqaOptions = 4

// MCQA returns n rows for the mcqa environment, as the environment's own
// rows (mcqa.Row) write them: the questions of Arithmetic(n, seed), each
// followed by four lettered options, one line each ("A) 140"), one of
// them the result, and an instruction to answer with the letter in
// \boxed{}. options lists them as upstream does, as one-key objects
// ([{"A":"140"},{"B":"139"},...]), and expected_answer is the right
// letter. The wrong options are near the result and never
// negative; where the right one sits is drawn from seed too.
func MCQA(n int, seed int64) []protocol.RunRequest {
	qs := questions(n, seed)
	rng := splitmix64(uint64(seed) ^ 0x6d637161) // a stream of its own, so the questions stay Arithmetic's
	offsets := []int64{-10, -2, -1, 1, 2, 10, 5, -5, 3, -3}
	rows := make([]protocol.RunRequest, len(qs))
	for i, q := range qs {
		values := make([]int64, 0, mcqaOptions)
		right := int(rng.next() % mcqaOptions)
		used := map[int64]bool{q.result: true}
		for len(values) < mcqaOptions-1 {
			v := q.result + offsets[rng.next()%uint64(len(offsets))]
			if v < 0 || used[v] {
				continue
			}
			used[v] = true
			values = append(values, v)
		}
		values = append(values[:right], append([]int64{q.result}, values[right:]...)...)
		options := make([]string, len(values))
		for j, v := range values {
			options[j] = strconv.FormatInt(v, 10)
		}
		rows[i] = withDefaultAgent(mcqa.Row(q.text, options, right))
	}
	return rows
}

// Equivalence returns n rows for the equivalence_rule environment, as the
// environment's own rows (equivalence.Row) write them: the questions of
// Arithmetic(n, seed), each followed by "Reply with only the number.",
// with the result as expected_answer.
func Equivalence(n int, seed int64) []protocol.RunRequest {
	qs := questions(n, seed)
	rows := make([]protocol.RunRequest, len(qs))
	for i, q := range qs {
		rows[i] = withDefaultAgent(equivalence.Row(q.text, q.answer()))
	}
	return rows
}

// Counter returns n distinct rows for the counter environment, whose
// resources server keeps a counter per session: the prompt "add a then
// add b then get the count", the counter's initial_count and the
// expected_count the verifier compares the final counter with
// (initial_count + a + b), and the two function tools in
// responses_create_params.tools, increment_counter {"count": integer}
// and get_counter_value {}. The numbers are drawn from seed.
func Counter(n int, seed int64) []protocol.RunRequest {
	if n <= 0 {
		return nil
	}
	maxStep := uint64(20)
	for maxStep*maxStep*(maxStep/2+1) < 4*uint64(n) {
		maxStep *= 2
	}
	rng := splitmix64(uint64(seed) ^ 0x636f756e746572)
	seen := make(map[[3]uint64]bool, n)
	rows := make([]protocol.RunRequest, 0, n)
	for len(rows) < n {
		k := [3]uint64{1 + rng.next()%maxStep, 1 + rng.next()%maxStep, rng.next() % (maxStep/2 + 1)}
		if seen[k] {
			continue
		}
		seen[k] = true
		// The environment's own row: its prompt, task fields and tools.
		rows = append(rows, withDefaultAgent(counter.Row(int(k[2]), int(k[0]), int(k[1]))))
	}
	return rows
}
