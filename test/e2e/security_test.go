package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testpki"
)

// pki is a test's certificate authority, the gateway's certificate files
// and a directory to write more into.
type pki struct {
	dir              string
	ca               *testpki.CA
	caFile           string
	certFile, keyFle string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	var err error
	if p.ca, err = testpki.NewCA("acpgate test CA"); err != nil {
		t.Fatal(err)
	}
	if p.caFile, err = p.ca.WriteFile(p.dir, "ca"); err != nil {
		t.Fatal(err)
	}
	p.certFile, p.keyFle = p.writeServerCert(t, "gateway-1")
	return p
}

func (p *pki) issue(t *testing.T, l testpki.Leaf) *testpki.Issued {
	t.Helper()
	c, err := p.ca.Issue(l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeServerCert issues a server certificate named cn and writes it over
// the gateway's files, in place.
func (p *pki) writeServerCert(t *testing.T, cn string) (string, string) {
	t.Helper()
	certFile, keyFile, err := p.issue(t, testpki.Leaf{CommonName: cn, Server: true}).WriteFiles(p.dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// tlsClient dials s over TLS trusting p's CA, presenting client when set.
func (p *pki) tlsClient(t *testing.T, s *served, client *testpki.Issued) *grpc.ClientConn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if client != nil {
		cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{client.Cert.Raw}, PrivateKey: client.Key}}
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func mtlsConfig(p *pki, clientAuth string) string {
	return e2eConfig + fmt.Sprintf(`heartbeat_interval: 200ms
tls: {cert_file: %s, key_file: %s, client_ca_file: %s, client_auth: %s}
auth: {mode: mtls}
`, p.certFile, p.keyFle, p.caFile, clientAuth)
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func listAgents(t *testing.T, conn *grpc.ClientConn, md ...string) error {
	ctx := metadata.AppendToOutgoingContext(callCtx(t), md...)
	_, err := acpgatev1.NewAgentGatewayClient(conn).ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	return err
}

func wantUnauthenticated(t *testing.T, what string, err error, says string) {
	t.Helper()
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), says) {
		t.Errorf("%s: got %v, want UNAUTHENTICATED saying %q", what, err, says)
	}
}

func waitLog(t *testing.T, s *served, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.log(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never logged %q:\n%s", text, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAClientCertificateFromTheCAIsAcceptedAndItsSPIFFEIDIsThePrincipal(t *testing.T) {
	p := newPKI(t)
	s := serve(t, "--config", writeConfig(t, mtlsConfig(p, "require")))
	client := p.issue(t, testpki.Leaf{CommonName: "runner", SPIFFEID: "spiffe://example.org/ns/ci/sa/runner"})
	if err := listAgents(t, p.tlsClient(t, s, client)); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "principal=spiffe://example.org/ns/ci/sa/runner")
}

func TestAClientCertificateWithoutASPIFFEIDIsNamedByItsCommonName(t *testing.T) {
	p := newPKI(t)
	s := serve(t, "--config", writeConfig(t, mtlsConfig(p, "require")))
	if err := listAgents(t, p.tlsClient(t, s, p.issue(t, testpki.Leaf{CommonName: "batch-7"}))); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "principal=batch-7")
}

func TestAClientCertificateFromAnotherCAOrExpiredIsUnauthenticatedWithTheReason(t *testing.T) {
	p := newPKI(t)
	s := serve(t, "--config", writeConfig(t, mtlsConfig(p, "require")))
	other, err := testpki.NewCA("someone else")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(testpki.Leaf{CommonName: "intruder"})
	if err != nil {
		t.Fatal(err)
	}
	expired := p.issue(t, testpki.Leaf{CommonName: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	wantUnauthenticated(t, "another CA", listAgents(t, p.tlsClient(t, s, foreign)), "unknown certificate authority")
	wantUnauthenticated(t, "expired", listAgents(t, p.tlsClient(t, s, expired)), "expired")
	if strings.Contains(s.log(), "principal=intruder") || strings.Contains(s.log(), "principal=old") {
		t.Errorf("a rejected certificate was taken as a principal:\n%s", s.log())
	}
}

func TestAClientWithoutACertificateIsRefusedUnderRequireAndUnauthenticatedUnderRequest(t *testing.T) {
	p := newPKI(t)
	s := serve(t, "--config", writeConfig(t, mtlsConfig(p, "require")))
	if err := listAgents(t, p.tlsClient(t, s, nil)); err == nil || status.Code(err) == codes.OK {
		t.Fatalf("a client without a certificate was served under require: %v", err)
	}
	s2 := serve(t, "--config", writeConfig(t, mtlsConfig(p, "request")))
	conn := p.tlsClient(t, s2, nil)
	wantUnauthenticated(t, "no certificate", listAgents(t, conn), "no client certificate")
	if _, err := healthpb.NewHealthClient(conn).Check(callCtx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health needs a certificate under request: %v", err)
	}
}

// serverCert is the certificate the gateway presented on conn's call.
func serverCert(t *testing.T, conn *grpc.ClientConn) *x509.Certificate {
	t.Helper()
	var pr peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(callCtx(t), &healthpb.HealthCheckRequest{}, grpc.Peer(&pr)); err != nil {
		t.Fatal(err)
	}
	info, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		t.Fatalf("no TLS peer certificate: %#v", pr.AuthInfo)
	}
	return info.State.PeerCertificates[0]
}

func TestRotatedServerCertificatesAreServedToNewConnectionsWhileOpenStreamsGoOn(t *testing.T) {
	p := newPKI(t)
	s := serve(t, "--config", writeConfig(t, mtlsConfig(p, "require")))
	client := p.issue(t, testpki.Leaf{CommonName: "runner"})
	old := p.tlsClient(t, s, client)
	if cn := serverCert(t, old).Subject.CommonName; cn != "gateway-1" {
		t.Fatalf("serving %q", cn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := acpgatev1.NewAgentGatewayClient(old).Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	p.writeServerCert(t, "gateway-2")
	deadline := time.Now().Add(15 * time.Second)
	for {
		fresh := p.tlsClient(t, s, client)
		cn := serverCert(t, fresh).Subject.CommonName
		_ = fresh.Close()
		if cn == "gateway-2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get %q:\n%s", cn, s.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitLog(t, s, "TLS files reloaded")

	// The stream opened before the rotation still delivers (heartbeats
	// every 200ms), on a connection that keeps the old certificate.
	for range 3 {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("the open stream broke after the rotation: %v", err)
		}
	}
	if cn := serverCert(t, old).Subject.CommonName; cn != "gateway-1" {
		t.Errorf("the old connection now reports %q", cn)
	}
}

func TestABrokenCertificateFileStopsTheStartNamingIt(t *testing.T) {
	p := newPKI(t)
	if err := os.WriteFile(p.keyFle, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(p.dir, "nowhere.crt")
	for _, tc := range []struct{ cfg, want string }{
		{mtlsConfig(p, "require"), p.keyFle},
		{strings.Replace(mtlsConfig(p, "require"), p.caFile, missing, 1), "tls.client_ca_file: " + missing + " cannot be read"},
	} {
		bin, _ := binaries(t)
		cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--config", writeConfig(t, tc.cfg))
		cmd.Env = append(os.Environ(), "ACPGATE_E2E_AGENT=x", "XDG_STATE_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("exit %v, output:\n%s\nwant exit 2 naming %q", err, out, tc.want)
		}
	}
}

func TestANonLoopbackListenerWithoutTLSOrAuthIsRefusedUnlessInsecure(t *testing.T) {
	bin, _ := binaries(t)
	cmd := exec.Command(bin, "serve", "--listen", "0.0.0.0:0", "--config", writeConfig(t, e2eConfig))
	cmd.Env = append(os.Environ(), "ACPGATE_E2E_AGENT=x", "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), "insecure: true") {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}
	s := serve(t, "--listen", "0.0.0.0:0", "--config", writeConfig(t, e2eConfig+"insecure: true\n"))
	if !strings.Contains(s.addr, ":") {
		t.Fatalf("listening on %q", s.addr)
	}
}

// jwtGateway serves TLS (no client certificates) with JWT auth.
func jwtGateway(t *testing.T) (*pki, *testpki.Signer, *served) {
	t.Helper()
	return jwtGatewayWith(t, "")
}

// jwtGatewayWith is jwtGateway with extra configuration appended.
func jwtGatewayWith(t *testing.T, extra string) (*pki, *testpki.Signer, *served) {
	t.Helper()
	return jwtGatewayFrom(t, func(p *pki, jwks string) string {
		return e2eConfig + fmt.Sprintf(`tls: {cert_file: %s, key_file: %s}
auth: {mode: jwt, jwks_file: %s, issuer: https://issuer.test, audience: acpgate, claims: [groups]}
`, p.certFile, p.keyFle, jwks) + extra
	})
}

// jwtGatewayFrom serves the configuration config writes for a fresh PKI
// and a JWKS file holding the returned signer's key.
func jwtGatewayFrom(t *testing.T, config func(p *pki, jwks string) string) (*pki, *testpki.Signer, *served) {
	t.Helper()
	p, signer, path := jwtConfig(t, config)
	return p, signer, serve(t, "--config", path)
}

// jwtConfig writes the configuration config returns for a fresh PKI and a
// JWKS file holding the returned signer's key, and returns its path, for a
// test that serves it more than once.
func jwtConfig(t *testing.T, config func(p *pki, jwks string) string) (*pki, *testpki.Signer, string) {
	t.Helper()
	p := newPKI(t)
	signer, err := testpki.NewSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(p.dir, "jwks.json")
	if err := os.WriteFile(jwks, signer.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, signer, writeConfig(t, config(p, jwks))
}

func goodClaims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "alice", "iss": "https://issuer.test", "aud": "acpgate", "exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"dev"}}
	if mod != nil {
		mod(c)
	}
	return c
}

func TestABearerTokenIsVerifiedAndItsSubjectIsThePrincipal(t *testing.T) {
	p, signer, s := jwtGateway(t)
	conn := p.tlsClient(t, s, nil)
	if err := listAgents(t, conn, "authorization", "Bearer "+signer.Sign(goodClaims(nil))); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "principal=alice")
}

func TestABadBearerTokenIsUnauthenticatedWithTheReasonAndNotEchoed(t *testing.T) {
	p, signer, s := jwtGateway(t)
	conn := p.tlsClient(t, s, nil)
	stranger, err := testpki.NewSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token, says string }{
		{"expired", signer.Sign(goodClaims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "expired"},
		{"wrong audience", signer.Sign(goodClaims(func(c jwt.MapClaims) { c["aud"] = "billing" })), "wrong audience"},
		{"bad signature", stranger.Sign(goodClaims(nil)), "bad signature"},
		{"alg none", testpki.Unsigned(goodClaims(nil)), `algorithm "none" is not allowed`},
	} {
		err := listAgents(t, conn, "authorization", "Bearer "+tc.token)
		wantUnauthenticated(t, tc.name, err, tc.says)
		for _, part := range strings.Split(tc.token, ".") {
			if len(part) > 8 && (strings.Contains(status.Convert(err).Message(), part) || strings.Contains(s.log(), part)) {
				t.Errorf("%s: the token is echoed", tc.name)
			}
		}
	}
	wantUnauthenticated(t, "no token", listAgents(t, conn), "no bearer token")
}

func TestHealthAndReflectionAreReachableWithoutCredentials(t *testing.T) {
	p, _, s := jwtGateway(t)
	conn := p.tlsClient(t, s, nil)
	if hc, err := healthpb.NewHealthClient(conn).Check(callCtx(t), &healthpb.HealthCheckRequest{Service: "acpgate.v1.AgentGateway"}); err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v %v", hc, err)
	}
	refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := refl.Recv()
	if err != nil || len(resp.GetListServicesResponse().GetService()) == 0 {
		t.Fatalf("reflection without a token: %v %v", resp, err)
	}
	wantUnauthenticated(t, "the gateway's own service", listAgents(t, conn), "no bearer token")
}
