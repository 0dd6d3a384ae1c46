package config

import (
	"fmt"
	"maps"
	"slices"

	"gopkg.in/yaml.v3"
)

// Quotas bound what each caller (auth principal) may use. A zero in any
// limit means no limit; with nothing configured every caller is unlimited.
type Quotas struct {
	// Default applies to every principal not named in Principals, and to
	// the anonymous caller (principal "").
	Default Quota
	// Principals are per-principal quotas, by principal name; a named
	// principal's quota replaces Default entirely.
	Principals map[string]Quota
}

// Quota is one principal's limits; 0 means no limit.
type Quota struct {
	// ConcurrentTurns bounds the principal's turns running at once.
	ConcurrentTurns int
	// OpenSessions bounds the principal's sessions open or opening,
	// one-shot sessions included.
	OpenSessions int
	// TurnsPerMinute bounds the rate at which the principal starts turns,
	// as a token bucket holding a minute's worth.
	TurnsPerMinute int
}

// For is the quota of principal name.
func (q Quotas) For(name string) Quota {
	if p, ok := q.Principals[name]; ok {
		return p
	}
	return q.Default
}

// Audit configures the audit log: one record per RPC.
type Audit struct {
	// Enabled writes the records (default true).
	Enabled bool
	// IncludeText adds a Prompt's text to its record.
	IncludeText bool
}

// quotas decodes the quotas mapping.
func (d *decoder) quotas(n *yaml.Node, q *Quotas) {
	f := field{"quotas", "quotas"}
	d.fields(n, f, "in quotas", map[string]func(*yaml.Node){
		"default": func(v *yaml.Node) { d.quota(v, f.child("default"), &q.Default) },
		"principals": func(v *yaml.Node) {
			pf := f.child("principals")
			q.Principals = map[string]Quota{}
			d.pairs(v, pf, "in quotas.principals", func(key string, _, v *yaml.Node) {
				var p Quota
				d.quota(v, field{pf.path + "." + key, fmt.Sprintf("quotas.principals %q", key)}, &p)
				q.Principals[key] = p
			})
		},
	})
}

func (d *decoder) quota(n *yaml.Node, f field, q *Quota) {
	d.fields(n, f, "in "+f.label, map[string]func(*yaml.Node){
		"concurrent_turns": d.intInto(&q.ConcurrentTurns, f.child("concurrent_turns")),
		"open_sessions":    d.intInto(&q.OpenSessions, f.child("open_sessions")),
		"turns_per_minute": d.intInto(&q.TurnsPerMinute, f.child("turns_per_minute")),
	})
}

// audit decodes the audit mapping.
func (d *decoder) audit(n *yaml.Node, a *Audit) {
	f := field{"audit", "audit"}
	d.fields(n, f, "in audit", map[string]func(*yaml.Node){
		"enabled":      d.boolInto(&a.Enabled, f.child("enabled")),
		"include_text": d.boolInto(&a.IncludeText, f.child("include_text")),
	})
}

// quotas checks that no quota is negative.
func (v *checker) quotas(q Quotas) {
	check := func(path, label string, p Quota) {
		for _, l := range []struct {
			key string
			n   int
		}{{"concurrent_turns", p.ConcurrentTurns}, {"open_sessions", p.OpenSessions}, {"turns_per_minute", p.TurnsPerMinute}} {
			if l.n < 0 {
				v.add(path+"."+l.key, "%s.%s: must be 0 (no limit) or positive, got %d", label, l.key, l.n)
			}
		}
	}
	check("quotas.default", "quotas.default", q.Default)
	for _, name := range slices.Sorted(maps.Keys(q.Principals)) {
		check("quotas.principals."+name, fmt.Sprintf("quotas.principals %q", name), q.Principals[name])
	}
}
