// Package spelling finds the known names nearest a mistyped one: the "did
// you mean" of the configuration's unknown keys and of an unknown agent.
// One measure and one bound for both, so the two suggest alike.
package spelling

// MaxDistance is the most edits a known name may be from the mistyped one
// to be suggested: more, and the suggestion is a guess more often than a
// correction.
const MaxDistance = 2

// Nearest returns the names of known nearest to word, when some are within
// MaxDistance edits of it: all those at the least distance, in known's
// order. It returns nil when none is close enough.
func Nearest(word string, known []string) []string {
	var best []string
	bestDist := MaxDistance + 1
	for _, k := range known {
		switch dist := Distance(word, k); {
		case dist > MaxDistance:
		case dist < bestDist:
			best, bestDist = []string{k}, dist
		case dist == bestDist:
			best = append(best, k)
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
