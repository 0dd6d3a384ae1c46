package auth_test

import (
	"testing"

	"github.com/acpgate/acpgate/internal/auth"
)

func TestPatternsSelectByExactNamePrefixOrClaim(t *testing.T) {
	trainer := auth.Principal{Name: "spiffe://example.org/ml/trainer"}
	ops := auth.Principal{Name: "alice", Attributes: map[string][]string{"groups": {"ops", "ml-team"}}}
	anonymous := auth.Principal{}
	cases := []struct {
		pattern string
		who     auth.Principal
		want    bool
	}{
		{"spiffe://example.org/ml/trainer", trainer, true},
		{"spiffe://example.org/ml/train", trainer, false},
		{"spiffe://example.org/ml/*", trainer, true},
		{"spiffe://example.org/web/*", trainer, false},
		{"spiffe://other.org/*", trainer, false},
		{"claim:groups=ml-team", ops, true},
		{"claim:groups=finance", ops, false},
		{"claim:groups=ml-team", trainer, false},
		{"*", trainer, true},
		{"*", anonymous, false},
		{"alice", anonymous, false},
	}
	for _, c := range cases {
		p, err := auth.ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := p.Matches(c.who); got != c.want {
			t.Errorf("%q matches %q: %v, want %v", c.pattern, c.who.Name, got, c.want)
		}
	}
	for _, bad := range []string{"", "claim:groups", "claim:=x", "a*b", "**"} {
		if _, err := auth.ParsePattern(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
