package tlsreload

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/testpki"
)

func TestChangedFilesAreReloadedAndABrokenReloadKeepsTheLastGoodCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := ca.Issue(testpki.Leaf{CommonName: "first", Server: true})
	certFile, keyFile, err := first.WriteFiles(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r, err := New(Files{CertFile: certFile, KeyFile: keyFile}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r.now = func() time.Time { return clock }
	if got := r.Current().Cert.Leaf.Subject.CommonName; got != "first" {
		t.Fatalf("serving %q", got)
	}

	second, _ := ca.Issue(testpki.Leaf{CommonName: "second-with-a-longer-name", Server: true})
	if _, _, err := second.WriteFiles(dir, "server"); err != nil {
		t.Fatal(err)
	}
	if got := r.Current().Cert.Leaf.Subject.CommonName; got != "first" {
		t.Fatalf("reloaded within the check interval: %q", got)
	}
	clock = clock.Add(CheckInterval)
	if got := r.Current().Cert.Leaf.Subject.CommonName; got != "second-with-a-longer-name" {
		t.Fatalf("not reloaded: %q", got)
	}

	if err := os.WriteFile(keyFile, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(CheckInterval)
	if got := r.Current().Cert.Leaf.Subject.CommonName; got != "second-with-a-longer-name" {
		t.Fatalf("a broken reload replaced the certificate: %q", got)
	}
	if !strings.Contains(logs.String(), "reloading TLS files failed") {
		t.Fatalf("the failed reload was not logged:\n%s", logs.String())
	}
}

func TestFilesThatDoNotLoadStopTheStart(t *testing.T) {
	dir := t.TempDir()
	_, err := New(Files{CertFile: dir + "/missing.crt", KeyFile: dir + "/missing.key"}, slog.Default())
	if err == nil || !strings.Contains(err.Error(), "missing.crt") {
		t.Fatalf("err %v", err)
	}
}
