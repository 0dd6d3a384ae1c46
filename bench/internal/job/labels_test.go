package job

import "testing"

func TestNaiveLabelsRunTheirClientOnTheNaiveAgentAndKeepTheBaselineApart(t *testing.T) {
	for _, c := range []struct {
		label, client string
		naive, onBase bool
	}{
		{"gateway", "gateway", false, false},
		{OnNaive("gateway"), "gateway", true, false},
		{OnBaseline(OnNaive(GatewayStream)), GatewayStream, true, true},
		{OnNaive("floor"), "floor", true, false},
	} {
		j := ForLabel(c.label, 10, 64)
		if j.Client != c.client || j.Naive != c.naive || IsBaseline(c.label) != c.onBase {
			t.Errorf("%q: client %q naive %v baseline %v", c.label, j.Client, j.Naive, IsBaseline(c.label))
		}
	}
}
