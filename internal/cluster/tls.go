package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSDial is the dial option of replicas that serve TLS: the other
// replicas' certificates are verified against the CAs in caFile, and this
// replica presents its own certificate (certFile, keyFile), read at each
// handshake so that a rotated one is used at once, as its client
// certificate.
func TLSDial(caFile, certFile, keyFile string) (grpc.DialOption, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.ca_file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster.ca_file %s: no PEM certificate in it", caFile)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("this replica's certificate: %w", err)
			}
			return &c, nil
		},
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}
