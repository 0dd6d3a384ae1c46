// Package auth is who is calling the gateway: the Principal a verified
// credential names, carried in a call's context, and the verifiers that
// establish it from a client certificate (mTLS) or a bearer token (JWT).
//
// A verifier never echoes the credential it rejects: its errors say what
// was wrong (expired, wrong audience, unknown CA) and nothing of the token.
package auth

import "context"

// Principal is a verified caller: a name (a SPIFFE ID, a certificate's
// common name, a token's subject) and attributes taken from the credential
// (a token's configured claims, say).
type Principal struct {
	// Name identifies the caller.
	Name string
	// Attributes hold further facts the credential asserted, by name.
	Attributes map[string][]string
}

type principalKey struct{}

// NewContext is ctx carrying p.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the Principal ctx carries; ok is false when the call was
// not authenticated (auth mode none, or a public method).
func FromContext(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}
