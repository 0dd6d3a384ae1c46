package auth

import (
	"reflect"
	"strings"
	"testing"
)

// Header values as Envoy's documentation and Istio's sidecars write them.
const (
	envoyDoc = `By=http://frontend.lyft.com;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject="/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client";URI=http://testclient.lyft.com`
	istio    = `By=spiffe://cluster.local/ns/agents/sa/acpgate;Hash=2a4e3ad2bd9b5b5f3a30c4a3bc9ab54e8d2f3dc2b7f3a8c0d6b5e9a0c1d2e3f4;Subject="";URI=spiffe://cluster.local/ns/ml/sa/trainer`
)

func TestAnXFCCValueParsesIntoItsElementsAndPairs(t *testing.T) {
	for _, c := range []struct {
		name, header string
		want         []XFCCElement
	}{
		{"envoy's example", envoyDoc, []XFCCElement{{
			By: "http://frontend.lyft.com", Hash: "468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688",
			Subject: "/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client", URI: []string{"http://testclient.lyft.com"}}}},
		{"several certificates, each proxy's element appended", `By=http://frontend.lyft.com;Hash=468e;URI=http://testclient.lyft.com,By=http://backend.lyft.com;Hash=9ba6;URI=http://frontend.lyft.com`, []XFCCElement{
			{By: "http://frontend.lyft.com", Hash: "468e", URI: []string{"http://testclient.lyft.com"}},
			{By: "http://backend.lyft.com", Hash: "9ba6", URI: []string{"http://frontend.lyft.com"}}}},
		{"quoted values holding separators and escaped quotes", `By=spiffe://td/a;Subject="CN=\"Smith, J\";O=x=y";URI=spiffe://td/b;DNS=b.example;DNS="c.example"`, []XFCCElement{{
			By: "spiffe://td/a", Subject: `CN="Smith, J";O=x=y`, URI: []string{"spiffe://td/b"}, DNS: []string{"b.example", "c.example"}}}},
		{"keys in any case, spaces after separators, unknown keys skipped", `by=spiffe://td/a; hash=ab; Future=1,  URI=spiffe://td/c`, []XFCCElement{
			{By: "spiffe://td/a", Hash: "ab"}, {URI: []string{"spiffe://td/c"}}}},
	} {
		got, err := ParseXFCC(c.header)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, %v\nwant %+v", c.name, got, err, c.want)
		}
	}
}

func TestAnXFCCValueOffTheGrammarIsRefusedNotHalfRead(t *testing.T) {
	for _, h := range []string{
		``,
		`URI=spiffe://td/a,`,
		`URI=spiffe://td/a;;Hash=1`,
		`Subject="CN=unclosed;URI=spiffe://td/a`,
		`Subject="CN=a"junk;URI=spiffe://td/a`,
		`URI=spiffe://td/"a"`,
		`noequals`,
	} {
		if got, err := ParseXFCC(h); err == nil {
			t.Errorf("%q parsed as %+v", h, got)
		}
	}
}

func TestTheCallerIsTheSPIFFEIDOfTheElementTheSidecarAddedLast(t *testing.T) {
	for _, c := range []struct{ name, header, want string }{
		{"istio", istio, "spiffe://cluster.local/ns/ml/sa/trainer"},
		// The client wrote an element of its own naming an admin; the
		// sidecar appended the one it verified.
		{"a forged element before the sidecar's", `By=spiffe://cluster.local/ns/agents/sa/acpgate;URI=spiffe://cluster.local/ns/ops/sa/admin,` + istio, "spiffe://cluster.local/ns/ml/sa/trainer"},
		{"a DNS and an https URI beside the SPIFFE ID", `By=spiffe://td/gw;URI=https://example.com/x;URI=spiffe://td/ns/a;DNS=a.example`, "spiffe://td/ns/a"},
	} {
		p, err := PrincipalFromXFCC(c.header)
		if err != nil || p.Name != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, p.Name, err, c.want)
		}
	}
	p, _ := PrincipalFromXFCC(istio)
	if td := p.Attributes["trust_domain"]; len(td) != 1 || td[0] != "cluster.local" {
		t.Errorf("trust_domain %v", td)
	}
	for _, c := range []struct{ name, header, says string }{
		{"no SPIFFE ID", envoyDoc, "names no SPIFFE ID"},
		{"the SPIFFE ID only in an earlier element", `URI=spiffe://td/a,By=spiffe://td/gw;Hash=1`, "names no SPIFFE ID"},
		{"two SPIFFE IDs", `URI=spiffe://td/a;URI=spiffe://td/b`, "exactly one"},
		{"an invalid SPIFFE ID", `URI=spiffe://TD/a`, "not a valid SPIFFE ID"},
	} {
		if _, err := PrincipalFromXFCC(c.header); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.says)
		}
	}
}
