// Command smokejwt mints a bearer token for the grpcurl smoke test: it reads
// an ECDSA P-256 private key (PEM, as openssl genpkey writes it), writes its
// public half as a JWKS, and prints an ES256 token valid for an hour.
//
//	smokejwt -key jwt.key -jwks jwks.json -iss https://issuer.test -aud acpgate -sub smoke
package main

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/acpgate/acpgate/internal/testpki"
)

func main() {
	keyFile := flag.String("key", "", "ECDSA P-256 private key, PEM")
	jwksFile := flag.String("jwks", "", "where to write the public key set")
	iss := flag.String("iss", "", "issuer")
	aud := flag.String("aud", "", "audience")
	sub := flag.String("sub", "smoke", "subject")
	flag.Parse()
	if err := run(*keyFile, *jwksFile, jwt.MapClaims{"iss": *iss, "aud": *aud, "sub": *sub, "exp": time.Now().Add(time.Hour).Unix()}); err != nil {
		fmt.Fprintln(os.Stderr, "smokejwt:", err)
		os.Exit(1)
	}
}

func run(keyFile, jwksFile string, claims jwt.MapClaims) error {
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return fmt.Errorf("%s: no PEM block", keyFile)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return err
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("%s: not an ECDSA key", keyFile)
	}
	signer := &testpki.Signer{Key: key, KID: "smoke"}
	if err := os.WriteFile(jwksFile, signer.JWKS(), 0o644); err != nil {
		return err
	}
	fmt.Println(signer.Sign(claims))
	return nil
}
