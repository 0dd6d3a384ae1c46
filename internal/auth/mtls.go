package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// ErrNoClientCert is the failure of a call that presented no client
// certificate where one is needed.
var ErrNoClientCert = errors.New("no client certificate was presented")

// VerifyClientCert checks a client's certificate chain (leaf first, as the
// TLS handshake received it) against roots, for client authentication at
// now, and names the Principal it identifies: the SPIFFE ID of its URI SAN
// when it has one, else its subject common name.
//
// The handshake has already proven the client holds the leaf's private key;
// this is the chain's trust, validity and usage.
func VerifyClientCert(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (Principal, error) {
	if len(chain) == 0 {
		return Principal{}, ErrNoClientCert
	}
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return Principal{}, fmt.Errorf("the client certificate is not trusted: %s", certProblem(err))
	}
	return PrincipalFromCert(leaf)
}

// PrincipalFromCert names the caller a verified certificate identifies: its
// SPIFFE ID (the spiffe:// URI SAN), else its subject common name.
func PrincipalFromCert(leaf *x509.Certificate) (Principal, error) {
	if id, err := x509svid.IDFromCert(leaf); err == nil {
		return spiffePrincipal(id), nil
	}
	if cn := leaf.Subject.CommonName; cn != "" {
		return Principal{Name: cn}, nil
	}
	return Principal{}, errors.New("the client certificate names no one: it has neither a SPIFFE ID (spiffe:// URI SAN) nor a subject common name")
}

// spiffePrincipal is the caller a SPIFFE ID names, with its trust domain
// as an attribute.
func spiffePrincipal(id spiffeid.ID) Principal {
	return Principal{Name: id.String(), Attributes: map[string][]string{"trust_domain": {id.TrustDomain().Name()}}}
}

// certProblem words a chain verification error.
func certProblem(err error) string {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return "signed by an unknown certificate authority"
	case errors.As(err, &invalid):
		switch invalid.Reason {
		case x509.Expired:
			return "expired or not yet valid (" + invalid.Detail + ")"
		case x509.IncompatibleUsage:
			return "not valid for client authentication (extended key usage)"
		}
	}
	return err.Error()
}
