package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const agentYAML = "agents: [{name: a, command: a}]\n"

func touch(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTLSAndJWTAuthAreReadWithTheirDefaults(t *testing.T) {
	dir := t.TempDir()
	crt, key, ca, jwks := touch(t, dir, "s.crt"), touch(t, dir, "s.key"), touch(t, dir, "ca.crt"), touch(t, dir, "jwks.json")
	c, err := Parse([]byte(agentYAML+"tls: {cert_file: "+crt+", key_file: "+key+", client_ca_file: "+ca+"}\n"+
		"auth: {mode: jwt, jwks_file: "+jwks+", issuer: https://i, audience: acpgate, claims: [groups]}\n"), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS.ClientAuth != ClientAuthRequire {
		t.Errorf("client_auth defaulted to %q with a client CA", c.TLS.ClientAuth)
	}
	if strings.Join(c.Auth.Algorithms, ",") != "RS256,ES256" || strings.Join(c.Auth.Public, ",") != "health,reflection" {
		t.Errorf("auth %+v", c.Auth)
	}
	c, err = Parse([]byte(agentYAML+"auth: {mode: none, public: []}\n"), "c.yaml", nil)
	if err != nil || c.Auth.Public == nil || len(c.Auth.Public) != 0 {
		t.Fatalf("an empty public list: %+v, %v", c.Auth.Public, err)
	}
}

func TestXFCCAuthTrustsLoopbackPeersByDefault(t *testing.T) {
	c, err := Parse([]byte(agentYAML+"auth: {mode: xfcc}\n"), "c.yaml", nil)
	if err != nil || strings.Join(c.Auth.TrustedPeers, ",") != "127.0.0.0/8,::1/128" {
		t.Fatalf("trusted peers %v, %v", c.Auth.TrustedPeers, err)
	}
	c, err = Parse([]byte(agentYAML+"auth: {mode: xfcc, trusted_peers: [10.1.2.3/32]}\n"), "c.yaml", nil)
	if err != nil || strings.Join(c.Auth.TrustedPeers, ",") != "10.1.2.3/32" {
		t.Fatalf("trusted peers %v, %v", c.Auth.TrustedPeers, err)
	}
}

func TestSecuritySettingsAreValidatedStrictly(t *testing.T) {
	dir := t.TempDir()
	crt, key := touch(t, dir, "s.crt"), touch(t, dir, "s.key")
	missing := filepath.Join(dir, "gone.pem")
	for _, tc := range []struct{ yaml, want string }{
		{"tls: {cert_file: " + missing + ", key_file: " + key + "}", "tls.cert_file: " + missing + " cannot be read: no such file or directory"},
		{"tls: {cert_file: " + crt + "}", "tls: key_file is required with cert_file"},
		{"tls: {cert_file: " + crt + ", key_file: " + key + ", client_auth: require}", "require needs tls.client_ca_file"},
		{"tls: {cert_file: " + crt + ", key_file: " + key + ", client_auth: always}", `tls.client_auth: "always" must be none, request or require`},
		{"tls: {cert_file: " + crt + ", key_file: " + key + ", client_ca_file: " + dir + "}", "is a directory"},
		{"tls: {certfile: x}", `unknown key "certfile" in tls (did you mean "cert_file"?)`},
		{"auth: {mode: mtls}", "auth.mode: mtls needs tls with client_ca_file"},
		{"auth: {mode: jwt}", "auth.jwks_file: required with auth.mode jwt"},
		{"auth: {mode: jwt, jwks_file: " + key + ", issuer: i, audience: a, algorithms: [HS256]}", `auth.algorithms[0]: "HS256" is not allowed`},
		{"auth: {mode: jwt, jwks_file: " + key + ", issuer: i, audience: a, algorithms: [none]}", `auth.algorithms[0]: "none" is not allowed`},
		{"auth: {mode: jwt, jwks_file: " + missing + ", issuer: i, audience: a}", "auth.jwks_file: " + missing + " cannot be read"},
		{"auth: {mode: saml}", `auth.mode: "saml" must be none, mtls, jwt or xfcc`},
		{"auth: {audience: a}", "auth.audience is only used with auth.mode jwt"},
		{"auth: {mode: xfcc, trusted_peers: [10.0.0.0/33]}", `auth.trusted_peers[0]: "10.0.0.0/33" is not a CIDR`},
		{"auth: {mode: xfcc, trusted_peers: []}", "auth.trusted_peers: empty"},
		{"auth: {mode: jwt, jwks_file: " + key + ", issuer: i, audience: a, trusted_peers: [127.0.0.0/8]}", "auth.trusted_peers is only used with auth.mode xfcc"},
		{"auth: {public: [metrics]}", `auth.public[0]: "metrics" must be health or reflection`},
		{"insecure: yes-please", "insecure: expected true or false"},
	} {
		_, err := Parse([]byte(agentYAML+tc.yaml+"\n"), "c.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.yaml, err, tc.want)
		}
	}
}

func TestOnlyALoopbackListenerMayGoWithoutTLSOrAuth(t *testing.T) {
	for _, tc := range []struct {
		listen   string
		insecure bool
		tls      bool
		refused  bool
	}{
		{"127.0.0.1:7070", false, false, false},
		{"127.8.9.10:7070", false, false, false},
		{"[::1]:7070", false, false, false},
		{"localhost:7070", false, false, false},
		{"0.0.0.0:7070", false, false, true},
		{":7070", false, false, true},
		{"gateway.internal:7070", false, false, true},
		{"0.0.0.0:7070", true, false, false},
		{"0.0.0.0:7070", false, true, false},
	} {
		c := defaults()
		c.Listen, c.Insecure = tc.listen, tc.insecure
		if tc.tls {
			c.TLS = TLS{CertFile: "c", KeyFile: "k"}
		}
		err := c.ExposureProblem()
		if (err != nil) != tc.refused {
			t.Errorf("%s insecure=%v tls=%v: %v", tc.listen, tc.insecure, tc.tls, err)
		}
		if err != nil && !strings.Contains(err.Error(), "insecure: true") {
			t.Errorf("the refusal does not say how to proceed: %v", err)
		}
	}
}
