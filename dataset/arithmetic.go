package dataset

import (
	"fmt"
	"strconv"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/resources/arithmetic"
)

// smallOperand is the largest operand the questions use while the dataset
// is small enough for two-digit numbers to give every row a distinct
// question.
const smallOperand = 99

// Arithmetic returns n rows asking distinct arithmetic questions derived
// from seed, such as "What is 87 + 53?" with +, - and *, each with the
// exact integer result as expected_answer and a readable task_id
// ("arith-000001", ...):
//
//	{"responses_create_params":{"input":[{"role":"user","content":"What is 87 + 53?"}]},
//	 "agent_ref":{"type":"responses_api_agents","name":"simple_agent"},
//	 "task_id":"arith-000001","expected_answer":"140"}
//
// Subtractions never go below zero. The same n and seed always give the
// same rows, on every platform and Go release: the pseudo-random
// generator is defined in this package rather than taken from math/rand,
// and a shorter dataset is a prefix of a longer one. Operands stay below
// 100 until n approaches the number of distinct two-digit questions;
// beyond that the operand range widens so that questions remain
// distinct. n <= 0 yields no rows.
func Arithmetic(n int, seed int64) []protocol.RunRequest {
	qs := questions(n, seed)
	rows := make([]protocol.RunRequest, len(qs))
	for i, q := range qs {
		rows[i] = withDefaultAgent(arithmetic.Row(fmt.Sprintf("arith-%06d", i+1), q.text, q.answer()))
	}
	return rows
}

// question is one generated arithmetic question.
type question struct {
	a, b   uint64
	op     string
	result int64
	text   string // "What is a op b?"
}

func (q question) answer() string { return strconv.FormatInt(q.result, 10) }

// questions draws n distinct questions from seed; every generator of the
// package starts from this sequence.
func questions(n int, seed int64) []question {
	if n <= 0 {
		return nil
	}
	maxOperand := uint64(smallOperand)
	// Keep the question space at least four times n, so drawing distinct
	// questions by rejection needs few retries.
	for questionSpace(maxOperand) < 4*uint64(n) {
		maxOperand = 2*maxOperand + 1
	}
	rng := splitmix64(uint64(seed))
	seen := make(map[string]struct{}, n)
	out := make([]question, 0, n)
	for len(out) < n {
		q := question{a: 1 + rng.next()%maxOperand, b: 1 + rng.next()%maxOperand}
		switch rng.next() % 3 {
		case 0:
			q.op, q.result = "+", int64(q.a+q.b)
		case 1:
			if q.a < q.b {
				q.a, q.b = q.b, q.a
			}
			q.op, q.result = "-", int64(q.a-q.b)
		default:
			q.op, q.result = "*", int64(q.a*q.b)
		}
		q.text = fmt.Sprintf("What is %d %s %d?", q.a, q.op, q.b)
		if _, dup := seen[q.text]; dup {
			continue
		}
		seen[q.text] = struct{}{}
		out = append(out, q)
	}
	return out
}

// questionSpace counts the distinct questions with operands in [1, m]:
// every ordered pair for + and *, and the pairs with a >= b for -.
func questionSpace(m uint64) uint64 {
	return 2*m*m + m*(m+1)/2
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 generator: tiny, fast
// and fully specified, which is what a reproducible dataset needs.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
