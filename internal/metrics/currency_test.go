package metrics

import (
	"fmt"
	"testing"
)

// costLabels gathers the currency labels of acpgate_cost_total and their
// values.
func costLabels(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "acpgate_cost_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "currency" {
					got[l.GetValue()] = metric.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

func TestAnAgentReportingANewCurrencyEveryTurnCannotGrowTheRegistry(t *testing.T) {
	m := New(Limits{})
	a := m.Agent("x")
	a.Cost("USD", 1)
	a.Cost("eur", 1) // ISO codes are upper case; a lower-case one is the same code
	a.Cost("EUR", 1)
	for i := range 1000 {
		a.Cost(fmt.Sprintf("X%02d", i%100), 1) // not letters
		a.Cost(string(rune('A'+i%26))+string(rune('A'+i/26%26))+"Q", 1)
	}
	a.Cost("US dollars", 1)
	got := costLabels(t, m)
	if len(got) != maxCurrencies+1 {
		t.Errorf("%d currency labels, want %d and %q: %v", len(got), maxCurrencies, otherCurrency, got)
	}
	if got["USD"] != 1 || got["EUR"] != 2 {
		t.Errorf("USD %v, EUR %v, want 1 and 2 (the first currencies keep their own label)", got["USD"], got["EUR"])
	}
	// Of the 2,004 costs, USD and EUR's three and the first six new codes'
	// (each met twice: the codes repeat after 676 turns) have labels.
	if want := float64(2004 - 3 - 6*2); got[otherCurrency] != want {
		t.Errorf("%q: %v, want %v", otherCurrency, got[otherCurrency], want)
	}
	var sum float64
	for _, v := range got {
		sum += v
	}
	if sum != 2004 {
		t.Errorf("the costs add up to %v, want every one of the 2004 counted", sum)
	}
}
