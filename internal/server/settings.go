package server

import (
	"context"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Session settings: clients change them with SetSessionMode and
// SetSessionConfigOption; what they are, and how they are kept, is package
// sessions' (settings.go).

// SetSessionMode switches an open session's mode.
func (g *Gateway) SetSessionMode(ctx context.Context, req *acpgatev1.SetSessionModeRequest) (*acpgatev1.Session, error) {
	live, err := g.sessions.Settable(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if err := live.SetMode(ctx, req.GetModeId()); err != nil {
		return nil, err
	}
	return live.Proto(), nil
}

// SetSessionConfigOption sets one configuration option of an open session.
func (g *Gateway) SetSessionConfigOption(ctx context.Context, req *acpgatev1.SetSessionConfigOptionRequest) (*acpgatev1.Session, error) {
	live, err := g.sessions.Settable(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if err := live.SetConfigOption(ctx, req.GetOptionId(), req.GetValue()); err != nil {
		return nil, err
	}
	return live.Proto(), nil
}
