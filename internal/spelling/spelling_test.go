package spelling

import (
	"slices"
	"testing"
)

func TestNearestSuggestsEveryNameAtTheLeastDistanceWithinTheBound(t *testing.T) {
	known := []string{"gemini", "gemma", "codex", "claude-code", "args"}
	for _, c := range []struct {
		word string
		want []string
	}{
		{"gemni", []string{"gemini"}},          // one edit
		{"gemin", []string{"gemini"}},          // one edit; gemma is two
		{"codec", []string{"codex"}},           // one edit
		{"url", nil},                           // args is three edits away: no guess
		{"claude", nil},                        // five edits from claude-code
		{"gemix", []string{"gemini", "gemma"}}, // a tie: both, in known's order
	} {
		if got := Nearest(c.word, known); !slices.Equal(got, c.want) {
			t.Errorf("Nearest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestDistanceCountsInsertionsDeletionsAndSubstitutions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"listne", "listen", 2}, {"same", "same", 0}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
