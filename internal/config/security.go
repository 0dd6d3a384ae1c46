package config

import (
	"fmt"
	"gopkg.in/yaml.v3"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/acpgate/acpgate/internal/auth"
)

// TLS is the transport security of the gRPC listener. The zero TLS is
// plaintext.
type TLS struct {
	// CertFile and KeyFile are the server's PEM certificate (chain) and key,
	// reloaded when they change.
	CertFile, KeyFile string
	// ClientCAFile holds the PEM CAs client certificates are verified
	// against, reloaded when it changes.
	ClientCAFile string
	// ClientAuth is the client certificate policy; Parse sets it to
	// ClientAuthRequire when ClientCAFile is set and it was not given, else
	// ClientAuthNone.
	ClientAuth ClientAuth
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// ClientAuth is a client certificate policy.
type ClientAuth string

// The client certificate policies.
const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequest asks for one and verifies it when one is given.
	ClientAuthRequest ClientAuth = "request"
	// ClientAuthRequire refuses a client without a verified certificate.
	ClientAuthRequire ClientAuth = "require"
)

// Auth is how callers are identified.
type Auth struct {
	// Mode is none, mtls, jwt or xfcc.
	Mode AuthMode
	// Public names the services reachable without credentials: health
	// and reflection by default.
	Public []string
	// JWKSFile is the JSON Web Key Set tokens are verified with (jwt).
	JWKSFile string
	// Issuer must equal a token's iss (jwt).
	Issuer string
	// Audience must be among a token's aud (jwt).
	Audience string
	// Algorithms allow-list a token's alg (jwt); RS256 and ES256 by
	// default. Only asymmetric algorithms are accepted.
	Algorithms []string
	// Claims are copied from a token into the caller's attributes (jwt).
	Claims []string
	// Admins are principal patterns (see Agent.Allow) that see and may act
	// on every session and turn, whoever started it.
	Admins []string
	// TrustedPeers are the networks (CIDRs) whose connections may carry
	// the x-forwarded-client-cert header (xfcc): the sidecar's address.
	// DefaultTrustedPeers when not given.
	TrustedPeers []string
}

// EffectiveMode is the mode in force: Mode, or AuthNone when it is unset
// (a Config built in code, not yet validated). The default lives here once.
func (a Auth) EffectiveMode() AuthMode {
	if a.Mode == "" {
		return AuthNone
	}
	return a.Mode
}

// DefaultTrustedPeers is Auth.TrustedPeers under xfcc when not given:
// loopback, where a sidecar in the gateway's pod connects from (Istio's
// inbound sidecar from 127.0.0.6).
var DefaultTrustedPeers = []string{"127.0.0.0/8", "::1/128"}

// AuthMode names how callers are identified.
type AuthMode string

// The auth modes.
const (
	// AuthNone identifies no one: every caller is anonymous.
	AuthNone AuthMode = "none"
	// AuthMTLS names the caller by its verified client certificate.
	AuthMTLS AuthMode = "mtls"
	// AuthJWT names the caller by a verified bearer token's sub.
	AuthJWT AuthMode = "jwt"
	// AuthXFCC names the caller by the SPIFFE ID in the
	// x-forwarded-client-cert header a sidecar (Envoy, Istio) sets, from
	// trusted peers only.
	AuthXFCC AuthMode = "xfcc"
)

// The services auth.public may name.
const (
	PublicHealth     = "health"
	PublicReflection = "reflection"
)

// tls decodes the tls mapping.
func (d *decoder) tls(n *yaml.Node, t *TLS) {
	f := field{"tls", "tls"}
	d.fields(n, f, "in tls", map[string]func(*yaml.Node){
		"cert_file":      d.stringInto(&t.CertFile, f.child("cert_file"), true),
		"key_file":       d.stringInto(&t.KeyFile, f.child("key_file"), true),
		"client_ca_file": d.stringInto(&t.ClientCAFile, f.child("client_ca_file"), true),
		"client_auth": func(v *yaml.Node) {
			if s, ok := d.scalar(v, f.child("client_auth")); ok {
				t.ClientAuth = ClientAuth(s)
			}
		},
	})
}

// auth decodes the auth mapping.
func (d *decoder) auth(n *yaml.Node, a *Auth) {
	f := field{"auth", "auth"}
	d.fields(n, f, "in auth", map[string]func(*yaml.Node){
		"mode": func(v *yaml.Node) {
			if s, ok := d.scalar(v, f.child("mode")); ok {
				a.Mode = AuthMode(s)
			}
		},
		"public": func(v *yaml.Node) {
			// An empty list is meaningful here: nothing is public.
			a.Public = []string{}
			d.listInto(&a.Public, f.child("public"), false)(v)
			if a.Public == nil {
				a.Public = []string{}
			}
		},
		"jwks_file":  d.stringInto(&a.JWKSFile, f.child("jwks_file"), true),
		"issuer":     d.stringInto(&a.Issuer, f.child("issuer"), true),
		"audience":   d.stringInto(&a.Audience, f.child("audience"), true),
		"algorithms": d.listInto(&a.Algorithms, f.child("algorithms"), false),
		"claims":     d.listInto(&a.Claims, f.child("claims"), false),
		"admins":     d.listInto(&a.Admins, f.child("admins"), false),
		"trusted_peers": func(v *yaml.Node) {
			// An empty list is refused, not taken for the default.
			d.listInto(&a.TrustedPeers, f.child("trusted_peers"), false)(v)
			if a.TrustedPeers == nil {
				a.TrustedPeers = []string{}
			}
		},
	})
}

// resolveSecurityDefaults fills the defaults that depend on other settings.
func (c *Config) resolveSecurityDefaults() {
	if c.TLS.ClientAuth == "" {
		c.TLS.ClientAuth = ClientAuthNone
		if c.TLS.ClientCAFile != "" {
			c.TLS.ClientAuth = ClientAuthRequire
		}
	}
	c.Auth.Mode = c.Auth.EffectiveMode()
	if c.Auth.Public == nil {
		c.Auth.Public = []string{PublicHealth, PublicReflection}
	}
	if c.Auth.Mode == AuthXFCC && c.Auth.TrustedPeers == nil {
		c.Auth.TrustedPeers = slices.Clone(DefaultTrustedPeers)
	}
	if c.Auth.Mode == AuthJWT && len(c.Auth.Algorithms) == 0 {
		c.Auth.Algorithms = slices.Clone(auth.DefaultAlgorithms)
	}
}

// security checks tls, auth and insecure.
func (v *checker) security(c *Config) {
	t := c.TLS
	if t.Enabled() {
		if t.CertFile == "" {
			v.add("tls", "tls: cert_file is required with key_file")
		}
		if t.KeyFile == "" {
			v.add("tls", "tls: key_file is required with cert_file")
		}
	} else if t.ClientCAFile != "" {
		v.add("tls.client_ca_file", "tls.client_ca_file needs tls.cert_file and tls.key_file: client certificates are only asked for over TLS")
	}
	v.readable("tls.cert_file", t.CertFile)
	v.readable("tls.key_file", t.KeyFile)
	v.readable("tls.client_ca_file", t.ClientCAFile)
	switch t.ClientAuth {
	case ClientAuthNone:
		if t.ClientCAFile != "" {
			v.add("tls.client_auth", "tls.client_auth: none, but tls.client_ca_file is set; use request or require, or drop client_ca_file")
		}
	case ClientAuthRequest, ClientAuthRequire:
		if t.ClientCAFile == "" && t.Enabled() {
			v.add("tls.client_auth", "tls.client_auth: %s needs tls.client_ca_file to verify client certificates against", t.ClientAuth)
		}
	default:
		v.add("tls.client_auth", "tls.client_auth: %q must be none, request or require", t.ClientAuth)
	}

	a := c.Auth
	jwtOnly := map[string]bool{"jwks_file": a.JWKSFile != "", "issuer": a.Issuer != "", "audience": a.Audience != "", "claims": len(a.Claims) > 0}
	switch a.Mode {
	case AuthNone:
	case AuthMTLS:
		if t.ClientCAFile == "" {
			v.add("auth.mode", "auth.mode: mtls needs tls with client_ca_file (and client_auth request or require)")
		}
	case AuthJWT:
		if a.JWKSFile == "" {
			v.add("auth.jwks_file", "auth.jwks_file: required with auth.mode jwt")
		}
		v.readable("auth.jwks_file", a.JWKSFile)
		if a.Issuer == "" {
			v.add("auth.issuer", "auth.issuer: required with auth.mode jwt (the iss tokens must carry)")
		}
		if a.Audience == "" {
			v.add("auth.audience", "auth.audience: required with auth.mode jwt (the aud tokens must be for)")
		}
		for i, alg := range a.Algorithms {
			if !slices.Contains(auth.AsymmetricAlgorithms, alg) {
				v.add(fmt.Sprintf("auth.algorithms[%d]", i), "auth.algorithms[%d]: %q is not allowed: use one of %s (public-key signatures only)", i, alg, strings.Join(auth.AsymmetricAlgorithms, ", "))
			}
		}
	case AuthXFCC:
		if len(a.TrustedPeers) == 0 {
			v.add("auth.trusted_peers", "auth.trusted_peers: empty, so no connection could name its caller; list the sidecar's address (loopback by default)")
		}
		for i, p := range a.TrustedPeers {
			if _, err := netip.ParsePrefix(p); err != nil {
				v.add(fmt.Sprintf("auth.trusted_peers[%d]", i), "auth.trusted_peers[%d]: %q is not a CIDR (say 127.0.0.0/8 or 10.0.0.5/32)", i, p)
			}
		}
	default:
		v.add("auth.mode", "auth.mode: %q must be none, mtls, jwt or xfcc", a.Mode)
	}
	if a.Mode != AuthXFCC && len(a.TrustedPeers) > 0 {
		v.add("auth.trusted_peers", "auth.trusted_peers is only used with auth.mode xfcc (the mode is %s)", a.Mode)
	}
	if a.Mode != AuthJWT {
		for _, key := range []string{"jwks_file", "issuer", "audience", "claims"} {
			if jwtOnly[key] {
				v.add("auth."+key, "auth.%s is only used with auth.mode jwt (the mode is %s)", key, a.Mode)
			}
		}
		if len(a.Algorithms) > 0 {
			v.add("auth.algorithms", "auth.algorithms is only used with auth.mode jwt (the mode is %s)", a.Mode)
		}
	}
	for i, pat := range a.Admins {
		if _, err := auth.ParsePattern(pat); err != nil {
			v.add(fmt.Sprintf("auth.admins[%d]", i), "auth.admins[%d]: %v", i, err)
		}
	}
	for i, p := range a.Public {
		if p != PublicHealth && p != PublicReflection {
			v.add(fmt.Sprintf("auth.public[%d]", i), "auth.public[%d]: %q must be %s or %s", i, p, PublicHealth, PublicReflection)
		}
	}
}

// readable checks that a configured file (when set) can be opened for
// reading now, so a wrong path stops the start rather than the first
// handshake.
func (v *checker) readable(path, file string) {
	if file == "" {
		return
	}
	f, err := os.Open(file)
	if err != nil {
		v.add(path, "%s: %s cannot be read: %v", path, file, unwrapPath(err))
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		v.add(path, "%s: %s is a directory, not a file", path, file)
	}
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// ExposureProblem says why serving on c.Listen as configured is refused,
// or nil: a listener reachable beyond this machine needs TLS or an auth
// mode, unless insecure is set (a mesh whose sidecar terminates mTLS).
// Loopback addresses (127.0.0.0/8, ::1, localhost) need neither.
func (c *Config) ExposureProblem() error {
	if c.Insecure || c.TLS.Enabled() || c.Auth.Mode != AuthNone && c.Auth.Mode != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return nil // Validate reports it
	}
	if IsLoopback(host) {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without tls or auth: it is reachable beyond this machine; configure tls (and auth), listen on 127.0.0.1, or set insecure: true when a sidecar terminates mTLS", c.Listen)
}

// IsLoopback reports whether host (of a host:port) only reaches this
// machine: localhost, or a loopback IP. "" (every interface) does not.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
