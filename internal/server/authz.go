package server

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/config"
)

// authz decides who may use which agent and who may see which session and
// turn. Every such decision is made here.
//
// Sessions and turns belong to the principal that created them. Another
// principal is told NOT_FOUND for them on every call, exactly as for an id
// that does not exist: a PERMISSION_DENIED would confirm that the id is in
// use. Admins see and may act on everything. Without authentication every
// caller is the same anonymous principal, which owns everything, as before.
type authz struct {
	admins auth.Patterns
	allow  map[string]auth.Patterns // agent → who may use it; absent: everyone
}

func newAuthz(cfg *config.Config) (authz, error) {
	z := authz{allow: make(map[string]auth.Patterns)}
	var err error
	if z.admins, err = auth.ParsePatterns(cfg.Auth.Admins); err != nil {
		return z, fmt.Errorf("auth.admins: %w", err)
	}
	for _, a := range cfg.Agents {
		if len(a.Allow) == 0 {
			continue
		}
		if z.allow[a.Name], err = auth.ParsePatterns(a.Allow); err != nil {
			return z, fmt.Errorf("agent %q: allow: %w", a.Name, err)
		}
	}
	return z, nil
}

// caller is the call's principal; the zero Principal when the call is not
// authenticated.
func caller(ctx context.Context) auth.Principal {
	p, _ := auth.FromContext(ctx)
	return p
}

// mayUse reports whether the caller may use agent.
func (z authz) mayUse(ctx context.Context, agent string) bool {
	patterns, limited := z.allow[agent]
	return !limited || patterns.Match(caller(ctx)) || z.isAdmin(ctx)
}

// use refuses a caller that may not use agent.
func (z authz) use(ctx context.Context, agent string) error {
	if z.mayUse(ctx, agent) {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "%s may not use agent %q", describeCaller(ctx), agent)
}

// sees reports whether the caller may see what owner created.
func (z authz) sees(ctx context.Context, owner string) bool {
	return caller(ctx).Name == owner || z.isAdmin(ctx)
}

// isAdmin reports whether the caller is an admin.
func (z authz) isAdmin(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && z.admins.Match(p)
}

// ownerFilter is the owner a caller's listings are limited to: nil for an
// admin, who sees every owner's.
func (z authz) ownerFilter(ctx context.Context) *string {
	if z.isAdmin(ctx) {
		return nil
	}
	name := caller(ctx).Name
	return &name
}

func describeCaller(ctx context.Context) string {
	if p, ok := auth.FromContext(ctx); ok {
		return fmt.Sprintf("caller %q", p.Name)
	}
	return "an unauthenticated caller"
}

// requestKey scopes a request_id to the caller that sent it: two callers
// using the same key run two turns and never learn of each other's. The
// separator cannot occur in a request_id (printable ASCII only).
func requestKey(owner, requestID string) string {
	if requestID == "" {
		return ""
	}
	return owner + "\x1f" + requestID
}

// requestIDOf is the request_id a client sent, from its scoped key.
func requestIDOf(key string) string {
	if i := strings.LastIndexByte(key, '\x1f'); i >= 0 {
		return key[i+1:]
	}
	return key
}
