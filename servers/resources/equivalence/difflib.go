package equivalence

import "math"

// This file holds the sequence-similarity measure: a Go implementation of
// the algorithm behind Python's difflib.SequenceMatcher(None, a, b).ratio(),
// written so that the result is the same float64 as CPython's.

// autojunkMinLen is the length of the second sequence from which the
// autojunk heuristic applies.
const autojunkMinLen = 200

// Ratio returns the similarity of a and b in [0, 1], the value of Python's
// difflib.SequenceMatcher(None, a, b).ratio(): 2*M/(len(a)+len(b)) with
// lengths in code points and M the number of code points in the matching
// blocks, or 1 when both strings are empty.
//
// The strings are decoded as UTF-8 into code points; each byte of an
// invalid sequence counts as one U+FFFD. The measure is not symmetric:
// the autojunk heuristic looks at b only (see the package documentation).
func Ratio(a, b string) float64 {
	return RatioRunes([]rune(a), []rune(b))
}

// RatioRunes is Ratio on sequences that are already decoded into code
// points. It does not modify a or b.
func RatioRunes(a, b []rune) float64 {
	total := len(a) + len(b)
	if total == 0 {
		return 1.0
	}
	m := matchedCount(a, b)
	return 2.0 * float64(m) / float64(total)
}

// matchedCount returns the total size of the matching blocks of a and b.
func matchedCount(a, b []rune) int {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	s := newSearcher(a, b)
	type span struct{ alo, ahi, blo, bhi int }
	// Pending sub-problems, worked last-in first-out. The order does not
	// change which blocks are found: every sub-problem is independent of
	// the others, and only the sum of block sizes is needed here.
	pending := []span{{0, len(a), 0, len(b)}}
	matched := 0
	for len(pending) > 0 {
		p := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		i, j, k := s.longest(p.alo, p.ahi, p.blo, p.bhi)
		if k == 0 {
			continue
		}
		matched += k
		if p.alo < i && p.blo < j {
			pending = append(pending, span{p.alo, i, p.blo, j})
		}
		if i+k < p.ahi && j+k < p.bhi {
			pending = append(pending, span{i + k, p.ahi, j + k, p.bhi})
		}
	}
	return matched
}

// searcher finds longest common runs between windows of a and b.
//
// It indexes b once: every distinct code point of b gets a small id, and
// the positions of each id are stored ascending, all ids back to back in
// one array (pos[start[id]:start[id+1]]). Two rows of the run-length
// table and the lists of their non-zero cells are kept for reuse across
// calls of longest. All of it lives in one []int32 allocation.
type searcher struct {
	a, b []rune

	asciiID [128]int32     // id+1 of each code point below 128, 0 when absent
	otherID map[rune]int32 // id+1 of every other code point of b
	start   []int32        // start[id]: first index in pos of that id
	pos     []int32        // positions in b, grouped by id
	limit   int32          // ids with more positions are popular; 0: no limit

	prev, cur []int32 // prev[j+1]: run ending at a[i-1], b[j]; cur likewise for a[i]
	usedPrev  []int32 // indexes of prev that are non-zero
	usedCur   []int32 // indexes of cur that are non-zero
}

func newSearcher(a, b []rune) *searcher {
	// Positions are int32: a []rune long enough to overflow them would
	// take 8 GiB.
	if len(b) >= math.MaxInt32 {
		panic("equivalence: string too long to compare")
	}
	n := len(b)
	s := &searcher{a: a, b: b}
	if n >= autojunkMinLen {
		// A code point more frequent than this in b is "popular": it
		// never starts a match. It stays matchable when a match found
		// from other code points is extended over it.
		s.limit = int32(n/100 + 1)
	}
	// bid, pos, prev, cur, usedPrev, usedCur, then start, which needs
	// one cell per distinct code point (at most n) plus one.
	mem := make([]int32, 7*n+3)
	bid, mem := mem[:n:n], mem[n:]
	s.pos, mem = mem[:n:n], mem[n:]
	s.prev, mem = mem[:n+1:n+1], mem[n+1:]
	s.cur, mem = mem[:n+1:n+1], mem[n+1:]
	s.usedPrev, mem = mem[:0:n], mem[n:]
	s.usedCur, mem = mem[:0:n], mem[n:]

	ids := int32(0)
	for j, c := range b {
		var id int32
		if c >= 0 && c < 128 {
			id = s.asciiID[c]
			if id == 0 {
				ids++
				id, s.asciiID[c] = ids, ids
			}
		} else {
			if s.otherID == nil {
				s.otherID = make(map[rune]int32)
			}
			id = s.otherID[c]
			if id == 0 {
				ids++
				id = ids
				s.otherID[c] = id
			}
		}
		bid[j] = id - 1
	}
	// Counting sort of the positions by id: count, prefix sums, place.
	s.start = mem[: ids+1 : ids+1]
	for _, id := range bid {
		s.start[id+1]++
	}
	for id := int32(1); id <= ids; id++ {
		s.start[id] += s.start[id-1]
	}
	fill := s.cur[:ids] // the run-length rows are still unused
	copy(fill, s.start[:ids])
	for j, id := range bid {
		s.pos[fill[id]] = int32(j)
		fill[id]++
	}
	clear(fill)
	return s
}

// positions returns where c occurs in b, ascending, or nil when it does
// not occur or is popular.
func (s *searcher) positions(c rune) []int32 {
	var id int32
	if c >= 0 && c < 128 {
		id = s.asciiID[c]
	} else {
		id = s.otherID[c]
	}
	if id == 0 {
		return nil
	}
	p := s.pos[s.start[id-1]:s.start[id]]
	if s.limit > 0 && int32(len(p)) > s.limit {
		return nil
	}
	return p
}

// longest returns the longest common run a[i:i+k] == b[j:j+k] inside
// a[alo:ahi] and b[blo:bhi], as difflib's find_longest_match does with no
// junk predicate. Among runs seeded from indexed (non-popular) code
// points, the longest wins, and on ties the one starting first in a, then
// first in b. That run is then grown one code point at a time, first to
// the left and then to the right, while the neighbours are equal and stay
// inside the windows; popular code points are allowed in this growth.
// With no seeded run at all, the growth starts from an empty run at
// (alo, blo). When nothing matches it returns (alo, blo, 0).
func (s *searcher) longest(alo, ahi, blo, bhi int) (besti, bestj, bestk int) {
	a, b := s.a, s.b
	prev, cur := s.prev, s.cur
	usedPrev, usedCur := s.usedPrev[:0], s.usedCur[:0]
	lo, hi := int32(blo), int32(bhi)
	besti, bestj = alo, blo
	for i := alo; i < ahi; i++ {
		for _, j := range s.positions(a[i]) {
			if j < lo {
				continue
			}
			if j >= hi {
				break
			}
			k := prev[j] + 1
			cur[j+1] = k
			usedCur = append(usedCur, j+1)
			if int(k) > bestk {
				besti, bestj, bestk = i-int(k)+1, int(j)-int(k)+1, int(k)
			}
		}
		// The row for a[i] becomes the previous row; the old previous
		// row is wiped and reused as the next current one.
		for _, x := range usedPrev {
			prev[x] = 0
		}
		prev, cur = cur, prev
		usedPrev, usedCur = usedCur, usedPrev[:0]
	}
	for _, x := range usedPrev {
		prev[x] = 0
	}
	s.prev, s.cur = prev, cur
	s.usedPrev, s.usedCur = usedPrev[:0], usedCur[:0]

	for besti > alo && bestj > blo && a[besti-1] == b[bestj-1] {
		besti, bestj, bestk = besti-1, bestj-1, bestk+1
	}
	for besti+bestk < ahi && bestj+bestk < bhi && a[besti+bestk] == b[bestj+bestk] {
		bestk++
	}
	return besti, bestj, bestk
}
