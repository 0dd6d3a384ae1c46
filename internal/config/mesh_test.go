package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/testpki"
)

// The mesh configurations docs/security.md points to ("Running in a mesh") parse, with real
// certificate and key files where they name them.
func TestTheMeshConfigurationsParse(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA("example CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(testpki.Leaf{CommonName: "acpgate", Server: true})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := testpki.NewSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"svid.pem": testpki.CertPEM(server.Cert), "svid_key.pem": testpki.KeyPEM(server.Key), "bundle.pem": testpki.CertPEM(ca.Cert),
		"server.crt": testpki.CertPEM(server.Cert), "server.key": testpki.KeyPEM(server.Key), "jwks.json": signer.JWKS(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lookup := func(name string) (string, bool) {
		if strings.HasSuffix(name, "_DIR") {
			return dir, true
		}
		return "example", true
	}
	for _, name := range []string{"mesh-sidecar.yaml", "mesh-mtls.yaml", "mesh-jwt.yaml", "mesh-istio.yaml"} {
		if _, err := config.Load(filepath.Join("../../examples/config", name), lookup); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
