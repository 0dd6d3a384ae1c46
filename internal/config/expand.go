package config

import (
	"fmt"
	"strings"
)

// expand replaces each ${NAME} in s with lookup(NAME) and each $$ with $.
// It returns the expanded string and a description of every problem: a
// variable that is not set, a malformed reference, or a $ that starts
// neither. Each unset variable is reported once however often it appears.
func expand(s string, lookup func(string) (string, bool)) (string, []string) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var problems []string
	reported := map[string]bool{}
	report := func(p string) {
		if !reported[p] {
			reported[p] = true
			problems = append(problems, p)
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		next := byte(0)
		if i+1 < len(s) {
			next = s[i+1]
		}
		switch next {
		case '$':
			b.WriteByte('$')
			i += 2
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				report("a ${ without its closing }: write ${NAME}, or $$ for a literal $")
				return b.String(), problems
			}
			name := s[i+2 : i+2+end]
			i += 2 + end + 1
			if !validVarName(name) {
				report(fmt.Sprintf("${%s} is not a variable reference: a name is letters, digits and _, not starting with a digit", name))
				continue
			}
			v, ok := lookup(name)
			if !ok {
				report(fmt.Sprintf("environment variable %s is not set (referenced as ${%s})", name, name))
				continue
			}
			b.WriteString(v)
		default:
			report("a $ must start ${NAME} or be doubled ($$) for a literal $")
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), problems
}

// validVarName reports whether name is an environment variable name that
// ${NAME} may reference: [A-Za-z_][A-Za-z0-9_]*.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
