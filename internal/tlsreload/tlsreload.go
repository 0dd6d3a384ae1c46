// Package tlsreload serves TLS from certificate files that are replaced in
// place (cert-manager, SPIFFE helpers): each handshake looks at the files'
// modification time and size, at most once per CheckInterval, and reloads
// them when they changed. Connections already open keep the material they
// were made with. A reload that fails (a half-written file, a key that does
// not match) keeps the last good material and is logged.
//
// There is no goroutine: the check runs on the handshake that finds the
// interval passed, so nothing outlives the server.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CheckInterval is how often, at most, the files are looked at.
const CheckInterval = time.Second

// Files name the PEM files of a server's TLS material.
type Files struct {
	// CertFile and KeyFile are the server's certificate (chain) and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, holds the CAs client certificates are
	// verified against.
	ClientCAFile string
	// ClientAuth is the handshake's client certificate policy.
	ClientAuth tls.ClientAuthType
}

// Material is one loaded generation of the files.
type Material struct {
	Cert      *tls.Certificate
	ClientCAs *x509.CertPool
}

// Reloader holds the current Material and refreshes it from Files.
type Reloader struct {
	files    Files
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu        sync.Mutex
	cur       *Material
	stamps    []stamp
	lastCheck time.Time
}

// stamp is what a file looked like when it was loaded.
type stamp struct {
	mod  time.Time
	size int64
}

// New loads files; it fails when they cannot be loaded, so a gateway does
// not start with broken TLS. log receives reload reports.
func New(files Files, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{files: files, log: log, interval: CheckInterval, now: time.Now}
	stamps := r.stat()
	m, err := load(files)
	if err != nil {
		return nil, err
	}
	r.cur, r.stamps, r.lastCheck = m, stamps, r.now()
	return r, nil
}

// Current is the material in use, after reloading it when the files
// changed and the interval has passed.
func (r *Reloader) Current() *Material {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.lastCheck) < r.interval {
		return r.cur
	}
	r.lastCheck = now
	stamps := r.stat()
	if equalStamps(stamps, r.stamps) {
		return r.cur
	}
	m, err := load(r.files)
	if err != nil {
		// Keep the last good material; try again when the files change
		// once more (a writer that is not done yet, say).
		r.stamps = stamps
		r.log.Error("reloading TLS files failed; keeping the previous certificates", "err", err)
		return r.cur
	}
	r.cur, r.stamps = m, stamps
	r.log.Info("TLS files reloaded", "cert_file", r.files.CertFile, "subject", m.Cert.Leaf.Subject.String(), "serial", m.Cert.Leaf.SerialNumber.String(), "not_after", m.Cert.Leaf.NotAfter)
	return m
}

// ClientCAs is the current client CA pool (nil when there is none).
func (r *Reloader) ClientCAs() *x509.CertPool { return r.Current().ClientCAs }

// ServerConfig is the TLS configuration to serve with: every handshake
// gets the current material. It offers h2 only, as gRPC needs.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.Current()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{*m.Cert},
				ClientAuth:   r.files.ClientAuth,
			}
			// The CAs are named to the client only when the handshake
			// verifies against them: a client picks the certificate to
			// send by that list and sends none when none fits, so a
			// verifier after the handshake would only ever see "no
			// certificate" instead of the certificate that is wrong.
			if r.files.ClientAuth >= tls.VerifyClientCertIfGiven {
				c.ClientCAs = m.ClientCAs
			}
			return c, nil
		},
	}
}

func (r *Reloader) paths() []string {
	p := []string{r.files.CertFile, r.files.KeyFile}
	if r.files.ClientCAFile != "" {
		p = append(p, r.files.ClientCAFile)
	}
	return p
}

// stat stamps each file; a file that cannot be stat'ed gets a zero stamp.
func (r *Reloader) stat() []stamp {
	paths := r.paths()
	out := make([]stamp, len(paths))
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			out[i] = stamp{fi.ModTime(), fi.Size()}
		}
	}
	return out
}

func equalStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// load reads and checks the files.
func load(f Files) (*Material, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading tls.cert_file %s and tls.key_file %s: %w", f.CertFile, f.KeyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls.cert_file %s: %w", f.CertFile, err)
		}
	}
	m := &Material{Cert: &cert}
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tls.client_ca_file " + f.ClientCAFile + ": no PEM certificate in it")
		}
		m.ClientCAs = pool
	}
	return m, nil
}
