package metrics

import "sync"

// maxCurrencies bounds the currencies one agent's acpgate_cost_total is
// labelled with; otherCurrency labels the rest.
//
// The currency is the agent's word (ACP's usage_update cost.currency, an
// ISO 4217 code), and every label value is a time series the registry
// keeps for the life of the process and every scrape carries: an agent
// that reported a new string each turn (a bug, or on purpose) would grow
// both without bound. A real agent reports one currency, rarely two.
const maxCurrencies = 8

// otherCurrency labels a cost whose currency is not an ISO 4217-shaped
// code (three ASCII letters), or past the first maxCurrencies.
const otherCurrency = "other"

// currencies are the currency labels an agent's cost has used.
type currencies struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// label is the label value of currency: the code in upper case, once
// accepted; otherCurrency otherwise.
func (c *currencies) label(currency string) string {
	code, ok := isoCode(currency)
	if !ok {
		return otherCurrency
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[code]; ok {
		return code
	}
	if len(c.seen) >= maxCurrencies {
		return otherCurrency
	}
	if c.seen == nil {
		c.seen = make(map[string]struct{})
	}
	c.seen[code] = struct{}{}
	return code
}

// isoCode is s as an upper-case three-letter code, if it is three ASCII
// letters.
func isoCode(s string) (string, bool) {
	if len(s) != 3 {
		return "", false
	}
	b := []byte(s)
	for i, r := range b {
		switch {
		case r >= 'A' && r <= 'Z':
		case r >= 'a' && r <= 'z':
			b[i] = r - 'a' + 'A'
		default:
			return "", false
		}
	}
	return string(b), true
}
