package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/acpgate/acpgate/internal/auth"
)

// Metadata keys of a forwarded call. The secret proves the call comes from
// a replica; the principal is the caller that replica authenticated.
const (
	secretKey    = "acpgate-cluster-secret"
	principalKey = "acpgate-forwarded-principal-bin"
)

// minSecretBytes keeps a guessable secret out of a deployment: anyone who
// knows it can act as any caller.
const minSecretBytes = 16

// Secret is the secret the replicas share.
type Secret struct {
	digest [sha256.Size]byte
	value  string
}

// ReadSecret reads the shared secret from file (surrounding white space
// dropped).
func ReadSecret(file string) (Secret, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Secret{}, fmt.Errorf("cluster secret: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if len(v) < minSecretBytes {
		return Secret{}, fmt.Errorf("cluster secret %s: %d bytes; at least %d are needed", file, len(v), minSecretBytes)
	}
	return Secret{digest: sha256.Sum256([]byte(v)), value: v}, nil
}

// Outgoing is ctx carrying the secret and the caller p (when ok) as the
// metadata of a call forwarded to another replica. Metadata the caller
// sent is not passed on: the call is the replica's, on the caller's behalf.
func (s Secret) Outgoing(ctx context.Context, p auth.Principal, ok bool) (context.Context, error) {
	md := metadata.Pairs(secretKey, s.value)
	if ok {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encoding the forwarded caller: %w", err)
		}
		md.Append(principalKey, string(b))
	}
	return metadata.NewOutgoingContext(ctx, md), nil
}

// ErrBadSecret: a call claims to come from a replica with the wrong secret.
var ErrBadSecret = errors.New("the call claims to be forwarded by a replica, but its cluster secret is wrong")

// Incoming reads a call's metadata: forwarded reports whether it claims to
// come from a replica; when it does, err is ErrBadSecret unless the secret
// matches, and p is the caller it speaks for (ok false for none).
func (s Secret) Incoming(ctx context.Context) (p auth.Principal, ok, forwarded bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(secretKey)
	if len(vals) == 0 {
		return auth.Principal{}, false, false, nil
	}
	got := sha256.Sum256([]byte(vals[0]))
	if len(vals) != 1 || subtle.ConstantTimeCompare(got[:], s.digest[:]) != 1 {
		return auth.Principal{}, false, true, ErrBadSecret
	}
	if ps := md.Get(principalKey); len(ps) == 1 {
		if err := json.Unmarshal([]byte(ps[0]), &p); err != nil {
			return auth.Principal{}, false, true, fmt.Errorf("the forwarded caller does not decode: %w", err)
		}
		ok = true
	}
	return p, ok, true, nil
}

type forwardedKey struct{}

// MarkForwarded is ctx of a call another replica forwarded: it is served
// here or not at all, never forwarded again.
func MarkForwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

// Forwarded reports whether ctx is a call another replica forwarded.
func Forwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}
