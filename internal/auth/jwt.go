package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// DefaultAlgorithms are the JWT signature algorithms accepted when none are
// configured.
var DefaultAlgorithms = []string{"RS256", "ES256"}

// AsymmetricAlgorithms are the algorithms a JWT verifier may allow: public-
// key signatures only. HMAC (HS256…) would make the published key a shared
// secret, and "none" is no signature at all.
var AsymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// JWTOptions configure a JWTVerifier.
type JWTOptions struct {
	// Keys is the JSON Web Key Set the tokens are signed with.
	Keys jose.JSONWebKeySet
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be among the token's aud.
	Audience string
	// Algorithms allow-lists the token's alg; DefaultAlgorithms when empty.
	Algorithms []string
	// Claims name the claims copied into the Principal's attributes.
	Claims []string
	// Leeway is the clock skew tolerated on exp, nbf and iat.
	Leeway time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// JWTVerifier checks bearer tokens.
type JWTVerifier struct {
	opts JWTOptions
}

// LoadJWKS reads a JSON Web Key Set from a file.
func LoadJWKS(path string) (jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	data, err := os.ReadFile(path)
	if err != nil {
		return set, fmt.Errorf("reading the JWKS: %w", err)
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return set, fmt.Errorf("%s: not a JSON Web Key Set: %w", path, err)
	}
	if len(set.Keys) == 0 {
		return set, fmt.Errorf("%s: the JSON Web Key Set has no keys", path)
	}
	for i, k := range set.Keys {
		if !k.IsPublic() {
			return set, fmt.Errorf("%s: key %d (kid %q) is not a public key; publish only public keys", path, i, k.KeyID)
		}
	}
	return set, nil
}

// NewJWTVerifier checks opts: every algorithm must be an asymmetric one.
func NewJWTVerifier(opts JWTOptions) (*JWTVerifier, error) {
	if len(opts.Algorithms) == 0 {
		opts.Algorithms = DefaultAlgorithms
	}
	for _, a := range opts.Algorithms {
		if !slices.Contains(AsymmetricAlgorithms, a) {
			return nil, fmt.Errorf("algorithm %q is not allowed: use one of %s", a, strings.Join(AsymmetricAlgorithms, ", "))
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &JWTVerifier{opts: opts}, nil
}

// Verify checks token (without "Bearer ") and names its Principal: sub,
// with the configured claims as attributes. Its error says what is wrong
// and never contains the token.
func (v *JWTVerifier) Verify(token string) (Principal, error) {
	popts := []jwt.ParserOption{
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(v.opts.Leeway),
		jwt.WithTimeFunc(v.opts.Now),
		jwt.WithIssuedAt(),
	}
	if v.opts.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(v.opts.Issuer))
	}
	if v.opts.Audience != "" {
		popts = append(popts, jwt.WithAudience(v.opts.Audience))
	}
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(popts...).ParseWithClaims(token, claims, v.key)
	if err != nil {
		return Principal{}, errors.New(tokenProblem(err))
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return Principal{}, errors.New("the token has no subject (sub)")
	}
	p := Principal{Name: sub}
	for _, name := range v.opts.Claims {
		vals := claimStrings(claims[name])
		if len(vals) == 0 {
			continue
		}
		if p.Attributes == nil {
			p.Attributes = map[string][]string{}
		}
		p.Attributes[name] = vals
	}
	return p, nil
}

// errAlgorithm is a token signed with an algorithm not allowed.
type errAlgorithm struct{ alg string }

func (e errAlgorithm) Error() string { return fmt.Sprintf("algorithm %q is not allowed", e.alg) }

// key picks the verification key for t: the allow-list is checked first
// (so "none" and HMAC never reach a key), then the key by kid (or the only
// key when the token names none), which must be of the algorithm's type.
func (v *JWTVerifier) key(t *jwt.Token) (any, error) {
	alg, _ := t.Header["alg"].(string)
	if !slices.Contains(v.opts.Algorithms, alg) {
		return nil, errAlgorithm{alg}
	}
	kid, _ := t.Header["kid"].(string)
	var candidates []jose.JSONWebKey
	if kid != "" {
		candidates = v.opts.Keys.Key(kid)
	} else {
		candidates = v.opts.Keys.Keys
	}
	for _, k := range candidates {
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if keyFits(alg, k.Key) {
			return k.Key, nil
		}
	}
	if kid != "" {
		return nil, fmt.Errorf("no %s key with kid %q in the key set", alg, kid)
	}
	return nil, fmt.Errorf("no %s key in the key set", alg)
}

// keyFits reports whether key is of the type alg verifies with.
func keyFits(alg string, key any) bool {
	switch {
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		_, ok := key.(*rsa.PublicKey)
		return ok
	case strings.HasPrefix(alg, "ES"):
		_, ok := key.(*ecdsa.PublicKey)
		return ok
	case alg == "EdDSA":
		_, ok := key.(ed25519.PublicKey)
		return ok
	}
	return false
}

// tokenProblem words a parse error, naming the first cause that applies.
func tokenProblem(err error) string {
	var algErr errAlgorithm
	switch {
	case errors.As(err, &algErr):
		return "the token's signing " + algErr.Error()
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is malformed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "the token's signature is invalid (bad signature)"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token lacks a required claim (exp)"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "the token is not valid yet (nbf)"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token was issued in the future (iat)"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token is for another audience (wrong audience)"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token is from another issuer (wrong issuer)"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// The key lookup failed; its message names no token content.
		return "the token cannot be verified: " + lastCause(err)
	}
	return "the token is invalid"
}

// lastCause is the message of err's innermost wrapped error.
func lastCause(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// claimStrings is a claim's value as strings: a string, or a list of them;
// numbers and booleans in their JSON form.
func claimStrings(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, claimStrings(e)...)
		}
		return out
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil
		}
		return []string{string(b)}
	}
}
