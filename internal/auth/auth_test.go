package auth_test

import (
	"crypto/x509"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/testpki"
)

func mustCA(t *testing.T, name string) *testpki.CA {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t *testing.T, ca *testpki.CA, l testpki.Leaf) *testpki.Issued {
	t.Helper()
	c, err := ca.Issue(l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pool(ca *testpki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func TestAClientCertificateWithASPIFFEIDIsNamedByIt(t *testing.T) {
	ca := mustCA(t, "ca")
	c := mustIssue(t, ca, testpki.Leaf{CommonName: "worker", SPIFFEID: "spiffe://example.org/ns/ci/sa/runner"})
	p, err := auth.VerifyClientCert([]*x509.Certificate{c.Cert}, pool(ca), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "spiffe://example.org/ns/ci/sa/runner" {
		t.Fatalf("principal %q", p.Name)
	}
	if got := p.Attributes["trust_domain"]; len(got) != 1 || got[0] != "example.org" {
		t.Fatalf("trust_domain %v", got)
	}
}

func TestAClientCertificateWithoutASPIFFEIDIsNamedByItsCommonName(t *testing.T) {
	ca := mustCA(t, "ca")
	c := mustIssue(t, ca, testpki.Leaf{CommonName: "worker-7"})
	p, err := auth.VerifyClientCert([]*x509.Certificate{c.Cert}, pool(ca), time.Now())
	if err != nil || p.Name != "worker-7" {
		t.Fatalf("principal %q, err %v", p.Name, err)
	}
}

func TestAClientCertificateFailsWithTheReasonNamed(t *testing.T) {
	ca, other := mustCA(t, "ca"), mustCA(t, "other")
	good := mustIssue(t, ca, testpki.Leaf{CommonName: "w"})
	foreign := mustIssue(t, other, testpki.Leaf{CommonName: "w"})
	expired := mustIssue(t, ca, testpki.Leaf{CommonName: "w", NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	server := mustIssue(t, ca, testpki.Leaf{CommonName: "s", Server: true})
	anonymous := mustIssue(t, ca, testpki.Leaf{})
	for _, tc := range []struct {
		name  string
		chain []*x509.Certificate
		want  string
	}{
		{"none", nil, "no client certificate"},
		{"unknown CA", []*x509.Certificate{foreign.Cert}, "unknown certificate authority"},
		{"expired", []*x509.Certificate{expired.Cert}, "expired"},
		{"server usage", []*x509.Certificate{server.Cert}, "not valid for client authentication"},
		{"nameless", []*x509.Certificate{anonymous.Cert}, "names no one"},
	} {
		_, err := auth.VerifyClientCert(tc.chain, pool(ca), time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	if _, err := auth.VerifyClientCert([]*x509.Certificate{good.Cert}, pool(ca), time.Now()); err != nil {
		t.Fatal(err)
	}
}

func verifier(t *testing.T, s *testpki.Signer, opts auth.JWTOptions) *auth.JWTVerifier {
	t.Helper()
	if err := json.Unmarshal(s.JWKS(), &opts.Keys); err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewJWTVerifier(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func claims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "alice", "iss": "https://issuer.test", "aud": "acpgate", "exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"dev", "ops"}}
	if mod != nil {
		mod(c)
	}
	return c
}

func TestAGoodTokenNamesItsSubjectWithTheConfiguredClaims(t *testing.T) {
	s, _ := testpki.NewSigner("k1")
	v := verifier(t, s, auth.JWTOptions{Issuer: "https://issuer.test", Audience: "acpgate", Claims: []string{"groups", "missing"}})
	p, err := v.Verify(s.Sign(claims(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "alice" || strings.Join(p.Attributes["groups"], ",") != "dev,ops" || len(p.Attributes) != 1 {
		t.Fatalf("principal %+v", p)
	}
}

func TestABadTokenFailsWithTheReasonNamedAndTheTokenNotEchoed(t *testing.T) {
	s, _ := testpki.NewSigner("k1")
	other, _ := testpki.NewSigner("k1")
	v := verifier(t, s, auth.JWTOptions{Issuer: "https://issuer.test", Audience: "acpgate"})
	tampered := s.Sign(claims(nil))
	tampered = tampered[:len(tampered)-4] + "AAAA"
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil)).SignedString(s.JWKS())
	for _, tc := range []struct {
		name, token, want string
	}{
		{"expired", s.Sign(claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })), "expired"},
		{"no exp", s.Sign(claims(func(c jwt.MapClaims) { delete(c, "exp") })), "required claim"},
		{"audience", s.Sign(claims(func(c jwt.MapClaims) { c["aud"] = "someone-else" })), "wrong audience"},
		{"issuer", s.Sign(claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" })), "wrong issuer"},
		{"other key", other.Sign(claims(nil)), "bad signature"},
		{"tampered", tampered, "bad signature"},
		{"alg none", testpki.Unsigned(claims(nil)), `algorithm "none" is not allowed`},
		{"hmac", hs, `algorithm "HS256" is not allowed`},
		{"garbage", "not.a.token", "malformed"},
		{"no sub", s.Sign(claims(func(c jwt.MapClaims) { delete(c, "sub") })), "no subject"},
	} {
		_, err := v.Verify(tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to say %q", tc.name, err, tc.want)
			continue
		}
		for _, part := range strings.Split(tc.token, ".") {
			if len(part) > 8 && strings.Contains(err.Error(), part) {
				t.Errorf("%s: the error echoes the token: %v", tc.name, err)
			}
		}
	}
}

func TestAnHMACOrNoneAlgorithmCannotBeAllowed(t *testing.T) {
	for _, alg := range []string{"HS256", "none"} {
		if _, err := auth.NewJWTVerifier(auth.JWTOptions{Keys: jose.JSONWebKeySet{}, Algorithms: []string{alg}}); err == nil {
			t.Errorf("%s was accepted", alg)
		}
	}
}

func TestAPrincipalTravelsInTheContext(t *testing.T) {
	ctx := auth.NewContext(t.Context(), auth.Principal{Name: "bob"})
	if p, ok := auth.FromContext(ctx); !ok || p.Name != "bob" {
		t.Fatalf("%+v %v", p, ok)
	}
	if _, ok := auth.FromContext(t.Context()); ok {
		t.Fatal("a bare context carries a principal")
	}
}
