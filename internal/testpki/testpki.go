// Package testpki makes the certificates, keys and tokens tests need: a CA,
// server and client certificates issued by it, a signing key published as a
// JWKS, and tokens signed with it. Nothing here is for production use.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// CommonName is the subject CN.
	CommonName string
	// SPIFFEID, when set, is the spiffe:// URI SAN.
	SPIFFEID string
	// Server makes a server certificate for localhost and 127.0.0.1;
	// otherwise a client certificate.
	Server bool
	// AlsoClient makes a server certificate usable as a client
	// certificate too, as a gateway replica's is when it calls another.
	AlsoClient bool
	// NotBefore and NotAfter default to an hour ago and a day ahead.
	NotBefore, NotAfter time.Time
}

// Issued is a certificate and its key.
type Issued struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Issue signs a certificate for l.
func (ca *CA) Issue(l Leaf) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1) + 1000),
		Subject:      pkix.Name{CommonName: l.CommonName},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if l.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		if l.AlsoClient {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if l.SPIFFEID != "" {
		u, err := url.Parse(l.SPIFFEID)
		if err != nil {
			return nil, err
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Issued{Cert: cert, Key: key}, nil
}

// CertPEM is the certificate in PEM.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// KeyPEM is the private key in PEM (PKCS #8).
func KeyPEM(k crypto.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// WriteFiles writes the certificate and key to dir as name.crt and
// name.key, replacing them in place (the same inodes) when they exist, and
// returns the two paths.
func (i *Issued) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, CertPEM(i.Cert), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, KeyPEM(i.Key), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// WriteFile writes the CA's certificate to dir/name.crt and returns the path.
func (ca *CA) WriteFile(dir, name string) (string, error) {
	p := filepath.Join(dir, name+".crt")
	return p, os.WriteFile(p, CertPEM(ca.Cert), 0o600)
}

// Signer signs tokens with an ES256 key published as a JWKS.
type Signer struct {
	Key *ecdsa.PrivateKey
	KID string
}

// NewSigner makes a signing key with key id kid.
func NewSigner(kid string) (*Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Signer{Key: key, KID: kid}, nil
}

// JWKS is the public key set, as JSON.
func (s *Signer) JWKS() []byte {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &s.Key.PublicKey, KeyID: s.KID, Algorithm: "ES256", Use: "sig"}}}
	b, err := json.Marshal(set)
	if err != nil {
		panic(err)
	}
	return b
}

// Sign signs claims with ES256.
func (s *Signer) Sign(claims jwt.MapClaims) string {
	t := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	t.Header["kid"] = s.KID
	out, err := t.SignedString(s.Key)
	if err != nil {
		panic(fmt.Sprintf("signing a token: %v", err))
	}
	return out
}

// Unsigned is claims as an alg "none" token.
func Unsigned(claims jwt.MapClaims) string {
	out, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		panic(err)
	}
	return out
}
