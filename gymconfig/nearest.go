package gymconfig

import (
	"fmt"
	"strings"
)

// Nearest returns the known key closest to key by edit distance (case
// insensitive), or "" when none is close: a distance above
// max(2, len(key)/3) is not close. Ties go to the earlier known key. It
// feeds the "did you mean" of every unknown-key message.
func Nearest(key string, known []string) string {
	limit := max(2, len(key)/3)
	best, bestDist := "", limit+1
	lk := []rune(strings.ToLower(key))
	for _, k := range known {
		if d := editDistance(lk, []rune(strings.ToLower(k)), bestDist); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b; it stops early and
// returns a value >= bound once the distance cannot be below bound.
func editDistance(a, b []rune, bound int) int {
	if d := len(a) - len(b); d >= bound || -d >= bound {
		return bound
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= bound {
			return bound
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is ` (did you mean "x"?)` for the nearest known key, or "".
func didYouMean(key string, known []string) string {
	if n := Nearest(key, known); n != "" && n != key {
		return fmt.Sprintf(" (did you mean %q?)", n)
	}
	return ""
}
