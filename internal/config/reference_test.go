package config

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// uncommented returns examples/config/all.yaml with its commented-out
// settings ("# key: value" lines, at any indentation) made live, so that a
// decode of it visits every mapping the example shows, optional ones
// included. Validation is not the point: only which keys exist.
func uncommented(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../examples/config/all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	setting := regexp.MustCompile(`^(\s*)# ?(\s*(?:- )?[a-z_]+:(?:\s.*)?)$`)
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if m := setting.FindStringSubmatch(line); m != nil {
			line = m[1] + m[2]
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

// decoderKeys decodes data and returns the keys the decoder accepts in the
// mappings data has, and the keys data sets.
func decoderKeys(t *testing.T, data []byte) (known, set []string) {
	t.Helper()
	root, err := parseYAML(data, "all.yaml")
	if err != nil {
		t.Fatalf("examples/config/all.yaml, with its settings uncommented, is not YAML: %v", err)
	}
	d := newDecoder("all.yaml", func(string) (string, bool) { return "x", true })
	d.known = map[string]bool{}
	d.config(root, defaults())
	for k := range d.known {
		known = append(known, k)
	}
	for p := range d.lines {
		set = append(set, keyPath(p, "")[:len(keyPath(p, ""))-1])
	}
	slices.Sort(known)
	slices.Sort(set)
	return known, slices.Compact(set)
}

// documentedKeys reads the key column of docs/configuration.md's table. A
// row may name several keys: "`agents[].fs.read`, `fs.write`" names
// agents[].fs.read and agents[].fs.write (a later name is read against the
// first one's path).
func documentedKeys(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile("`([^`]+)`")
	out := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		names := tick.FindAllStringSubmatch(cells[1], -1)
		first := strings.Split(names[0][1], ".")
		for i, n := range names {
			name := n[1]
			if i > 0 {
				segs := strings.Split(name, ".")
				at := slices.Index(first, segs[0])
				if at < 0 {
					at = len(first) - 1
				}
				name = strings.Join(append(slices.Clone(first[:at]), segs...), ".")
			}
			out[name] = true
		}
	}
	return out
}

// One source for the configuration's keys: the decoder. Every key it
// accepts is shown in examples/config/all.yaml and documented in
// docs/configuration.md, and the documentation names no key it would
// refuse. A key added to the decoder without its documentation, or
// documented under a misspelt name, fails here.
func TestEveryKeyTheDecoderAcceptsIsInTheExampleAndTheReference(t *testing.T) {
	known, set := decoderKeys(t, uncommented(t))
	if len(known) < 50 {
		t.Fatalf("the decoder offered only %d keys; the walk of all.yaml is broken", len(known))
	}
	inExample := map[string]bool{}
	for _, k := range set {
		inExample[k] = true
	}
	documented := documentedKeys(t)
	// "quotas.principals.<name>" documents the keys under any name.
	matchesDoc := func(k string) bool {
		for d := range documented {
			pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(d), "<name>", `[^.]+`) + "$"
			if ok, _ := regexp.MatchString(pattern, k); ok {
				return true
			}
		}
		return false
	}
	// A key whose value is a mapping or a list of mappings is documented
	// by the keys inside it.
	isMapping := map[string]bool{}
	for _, k := range append(known, slices.Collect(maps.Keys(documented))...) {
		if i := strings.LastIndex(k, "."); i > 0 {
			isMapping[strings.TrimSuffix(k[:i], "[]")] = true
		}
	}
	for _, k := range known {
		if !inExample[k] {
			t.Errorf("examples/config/all.yaml does not show %s (add it, commented out if it has no default)", k)
		}
		if !isMapping[k] && !matchesDoc(k) {
			t.Errorf("docs/configuration.md does not document %s", k)
		}
	}
	knownSet := map[string]bool{}
	for _, k := range known {
		knownSet[k] = true
	}
	for d := range documented {
		if !knownSet[d] && !strings.Contains(d, "<") {
			t.Errorf("docs/configuration.md documents %s, which the decoder does not accept", d)
		}
	}
}
