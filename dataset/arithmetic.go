package dataset

import (
	"fmt"
	"strconv"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
)

// smallOperand is the largest operand Arithmetic uses while the dataset is
// small enough for two-digit numbers to give every task a distinct question.
const smallOperand = 99

// Arithmetic returns n distinct arithmetic tasks derived from seed: ids
// "arith-000001", "arith-000002", ..., questions such as
// "What is 17 + 25?" using +, - and *, and the exact integer result as
// Expected. Subtractions never go below zero.
//
// The same n and seed always give the same tasks, on every platform and Go
// release: the pseudo-random generator is defined in this package rather
// than taken from math/rand. Operands stay below 100 until n approaches the
// number of distinct two-digit questions; beyond that the operand range
// widens so that questions remain distinct. n <= 0 yields no tasks.
func Arithmetic(n int, seed int64) []protocol.Task {
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
	tasks := make([]protocol.Task, 0, n)
	for len(tasks) < n {
		a := 1 + rng.next()%maxOperand
		b := 1 + rng.next()%maxOperand
		var (
			op     string
			result int64
		)
		switch rng.next() % 3 {
		case 0:
			op, result = "+", int64(a+b)
		case 1:
			if a < b {
				a, b = b, a
			}
			op, result = "-", int64(a-b)
		default:
			op, result = "*", int64(a*b)
		}
		q := fmt.Sprintf("What is %d %s %d?", a, op, b)
		if _, dup := seen[q]; dup {
			continue
		}
		seen[q] = struct{}{}
		tasks = append(tasks, protocol.Task{
			ID:       fmt.Sprintf("arith-%06d", len(tasks)+1),
			Question: q,
			Expected: strconv.FormatInt(result, 10),
		})
	}
	return tasks
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
