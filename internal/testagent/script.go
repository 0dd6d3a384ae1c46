package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseScript turns the prompt text into steps. Any unknown directive or bad
// argument fails the whole script, before anything has run.
func parseScript(text string) ([]step, error) {
	var steps []step
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimLeft(strings.TrimRight(line, "\r"), " \t")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		s, err := parseDirective(name, rest)
		if err != nil {
			return nil, fmt.Errorf("script line %d: %q: %v", i+1, line, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// fields splits rest into between lo and hi whitespace-separated fields.
func fields(rest string, lo, hi int) ([]string, error) {
	f := strings.Fields(rest)
	if len(f) < lo || len(f) > hi {
		if lo == hi {
			return nil, fmt.Errorf("wants %d argument(s), got %d", lo, len(f))
		}
		return nil, fmt.Errorf("wants %d to %d arguments, got %d", lo, hi, len(f))
	}
	return f, nil
}

// ints parses every field as an integer.
func ints(f []string) ([]int, error) {
	out := make([]int, len(f))
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("argument %q is not an integer", s)
		}
		out[i] = n
	}
	return out, nil
}

// intArgs parses rest as exactly n non-negative integers.
func intArgs(rest string, n int) ([]int, error) {
	f, err := fields(rest, n, n)
	if err != nil {
		return nil, err
	}
	v, err := ints(f)
	if err != nil {
		return nil, err
	}
	for _, x := range v {
		if x < 0 {
			return nil, fmt.Errorf("argument %d is negative", x)
		}
	}
	return v, nil
}

// unescape turns the two-character sequences \n and \\ into a newline and a
// backslash; any other backslash is kept as it is.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func noArgs(rest string, s step) (step, error) {
	if strings.TrimSpace(rest) != "" {
		return nil, fmt.Errorf("takes no arguments")
	}
	return s, nil
}

// errOtherDirective is a group's parser's answer for a directive of
// another group.
var errOtherDirective = errors.New("not a directive of this group")

// parseDirective parses one directive, by the parser of its group.
func parseDirective(name, rest string) (step, error) {
	for _, parse := range []func(name, rest string) (step, error){parseUpdate, parseRequest, parseHost, parsePacing, parseEnding} {
		if s, err := parse(name, rest); err != errOtherDirective {
			return s, err
		}
	}
	return nil, fmt.Errorf("unknown directive %q", name)
}
