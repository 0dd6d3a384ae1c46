package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Pattern selects principals, for an agent's allow list and the admins:
//
//	spiffe://example.org/ml/trainer   exactly that principal
//	spiffe://example.org/ml/*         every principal whose name starts
//	                                  with the part before the "*" (a
//	                                  SPIFFE trust domain or path)
//	claim:groups=ml-team              every principal whose attribute
//	                                  "groups" (a token's configured claim)
//	                                  holds "ml-team"
type Pattern struct {
	exact, prefix string
	claim, value  string
}

// ParsePattern reads one pattern.
func ParsePattern(s string) (Pattern, error) {
	switch {
	case s == "":
		return Pattern{}, fmt.Errorf("an empty principal pattern")
	case strings.HasPrefix(s, "claim:"):
		name, value, ok := strings.Cut(strings.TrimPrefix(s, "claim:"), "=")
		if !ok || name == "" || value == "" {
			return Pattern{}, fmt.Errorf("principal pattern %q: write claim:NAME=VALUE", s)
		}
		return Pattern{claim: name, value: value}, nil
	case strings.HasSuffix(s, "*"):
		if strings.Count(s, "*") > 1 {
			return Pattern{}, fmt.Errorf("principal pattern %q: only a final * is allowed", s)
		}
		return Pattern{prefix: strings.TrimSuffix(s, "*")}, nil
	case strings.Contains(s, "*"):
		return Pattern{}, fmt.Errorf("principal pattern %q: only a final * is allowed", s)
	}
	return Pattern{exact: s}, nil
}

// Matches reports whether p selects the principal.
func (p Pattern) Matches(who Principal) bool {
	switch {
	case p.claim != "":
		return slices.Contains(who.Attributes[p.claim], p.value)
	case p.prefix != "" || p.exact == "":
		return who.Name != "" && strings.HasPrefix(who.Name, p.prefix)
	}
	return who.Name == p.exact
}

// Patterns is a list of patterns; it selects a principal any of them
// selects.
type Patterns []Pattern

// ParsePatterns reads a list of patterns.
func ParsePatterns(list []string) (Patterns, error) {
	out := make(Patterns, 0, len(list))
	for _, s := range list {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Match reports whether any pattern selects the principal.
func (ps Patterns) Match(who Principal) bool {
	return slices.ContainsFunc(ps, func(p Pattern) bool { return p.Matches(who) })
}
