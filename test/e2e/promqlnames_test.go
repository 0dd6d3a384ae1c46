package e2e

import (
	"slices"
	"strings"
	"testing"
)

// promqlMetricNames are the metric names a PromQL expression selects whose
// name starts with one of prefixes, sorted and without repeats.
//
// It is a small scanner rather than Prometheus's own parser
// (github.com/prometheus/prometheus/promql/parser): that module requires
// some 250 others (cloud SDKs, Kubernetes) and a newer Go and shared
// dependencies than the gateway's, a high price for a test. The scanner
// knows the few things that matter for telling a metric from everything
// else that looks like one: string literals ("grpc_x" in a matcher),
// label matchers inside braces (grpc_method="Prompt"), the label lists of
// by, without, on, ignoring, group_left and group_right, ranges and
// durations in brackets, Grafana's $variables, and function names (an
// identifier followed by a parenthesis). What is left and has a prefix is
// a metric name.
func promqlMetricNames(expr string, prefixes ...string) []string {
	var names []string
	braces := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			braces++
			i++
		case c == '}':
			braces--
			i++
		case c == '[':
			i = skipPast(expr, i, ']')
		case c == '$':
			i = skipIdentifier(expr, i+1)
		case isIdentStart(c):
			end := skipIdentifier(expr, i)
			word := expr[i:end]
			next := skipSpace(expr, end)
			switch {
			case braces > 0: // a label name in a matcher
			case labelListKeywords[word] && next < len(expr) && expr[next] == '(':
				end = skipPast(expr, next, ')')
			case next < len(expr) && expr[next] == '(': // a function
			default:
				for _, p := range prefixes {
					if strings.HasPrefix(word, p) {
						names = append(names, word)
						break
					}
				}
			}
			i = end
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// labelListKeywords are followed by a parenthesized list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func skipIdentifier(s string, i int) int {
	for i < len(s) && (isIdentStart(s[i]) || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return i
}

func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	return i
}

// skipPast returns the index after the first close at or after i.
func skipPast(s string, i int, close byte) int {
	if j := strings.IndexByte(s[i:], close); j >= 0 {
		return i + j + 1
	}
	return len(s)
}

// skipString returns the index after the string literal starting at i
// (backslash escapes in the quoted forms; none in backquoted).
func skipString(s string, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quote != '`':
			i++
		case s[i] == quote:
			return i + 1
		}
	}
	return len(s)
}

func TestThePromQLScannerFindsMetricNamesAndNothingThatOnlyLooksLikeOne(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`acpgate_sessions_open`, []string{"acpgate_sessions_open"}},
		{`sum by (grpc_method, grpc_code) (rate(grpc_server_handled_total{grpc_service="acpgate.v1.AgentGateway", grpc_type!~"grpc_x"}[$__rate_interval]))`,
			[]string{"grpc_server_handled_total"}},
		{`histogram_quantile(0.99, sum by (le, agent) (rate(acpgate_turn_duration_seconds_bucket{agent=~"$agent"}[5m])))`,
			[]string{"acpgate_turn_duration_seconds_bucket"}},
		{"sum without(grpc_code)(acpgate_a) / on (job) group_left(grpc_type) acpgate_b offset 5m or acpgate_a*0",
			[]string{"acpgate_a", "acpgate_b"}},
		{`acpgate_x{reason="acpgate_not_a_metric \" acpgate_still_not"} > 0.25 and up == 0`, []string{"acpgate_x"}},
		{"label_values(acpgate_turns_started_total, agent)", []string{"acpgate_turns_started_total"}},
		{"acpgate_y{a=`acpgate_z`}\n  /\n  acpgate_w", []string{"acpgate_w", "acpgate_y"}},
		{`increase(acpgate_cost_total[$__range])`, []string{"acpgate_cost_total"}},
		{`rate(other_metric[5m])`, nil},
	}
	for _, c := range cases {
		if got := promqlMetricNames(c.expr, "acpgate_", "grpc_"); !slices.Equal(got, c.want) {
			t.Errorf("promqlMetricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}
