package access

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/config"
)

// Authz decides who may use which agent and who may see which session and
// turn. Every such decision is made here.
//
// Sessions and turns belong to the principal that created them. Another
// principal is told NOT_FOUND for them on every call, exactly as for an id
// that does not exist: a PERMISSION_DENIED would confirm that the id is in
// use. Admins see and may act on everything. Without authentication every
// caller is the same anonymous principal, which owns everything, as before.
type Authz struct {
	admins auth.Patterns
	allow  map[string]auth.Patterns // agent → who may use it; absent: everyone
}

func NewAuthz(cfg *config.Config) (Authz, error) {
	z := Authz{allow: make(map[string]auth.Patterns)}
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

// Caller is the call's principal; the zero Principal when the call is not
// authenticated.
func Caller(ctx context.Context) auth.Principal {
	p, _ := auth.FromContext(ctx)
	return p
}

// MayUse reports whether the caller may use agent.
func (z Authz) MayUse(ctx context.Context, agent string) bool {
	patterns, limited := z.allow[agent]
	return !limited || patterns.Match(Caller(ctx)) || z.IsAdmin(ctx)
}

// Use refuses a caller that may not use agent.
func (z Authz) Use(ctx context.Context, agent string) error {
	if z.MayUse(ctx, agent) {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "%s may not use agent %q", describeCaller(ctx), agent)
}

// Sees reports whether the caller may see what owner created.
func (z Authz) Sees(ctx context.Context, owner string) bool {
	return Caller(ctx).Name == owner || z.IsAdmin(ctx)
}

// IsAdmin reports whether the caller is an admin.
func (z Authz) IsAdmin(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && z.admins.Match(p)
}

// OwnerFilter is the owner a caller's listings are limited to: nil for an
// admin, who sees every owner's.
func (z Authz) OwnerFilter(ctx context.Context) *string {
	if z.IsAdmin(ctx) {
		return nil
	}
	name := Caller(ctx).Name
	return &name
}

func describeCaller(ctx context.Context) string {
	if p, ok := auth.FromContext(ctx); ok {
		return fmt.Sprintf("caller %q", p.Name)
	}
	return "an unauthenticated caller"
}
