package server

import (
	"context"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
)

// ListAgentSessions lists one page of the sessions an agent keeps (ACP
// session/list).
func (g *Gateway) ListAgentSessions(ctx context.Context, req *acpgatev1.ListAgentSessionsRequest) (*acpgatev1.ListAgentSessionsResponse, error) {
	resp := &acpgatev1.ListAgentSessionsResponse{}
	err := g.sessions.WithAgent(ctx, req.GetAgent(), req.GetCwd(), func(sess *acp.Session, dir string) error {
		filter := ""
		if req.GetCwd() != "" {
			filter = dir
		}
		page, next, err := sess.ListSessions(ctx, filter, req.GetPageToken())
		if err != nil {
			return err
		}
		resp.NextPageToken = next
		for _, x := range page {
			resp.Sessions = append(resp.Sessions, &acpgatev1.AgentSession{AcpSessionId: x.ID, Cwd: x.Cwd, Title: x.Title, UpdatedAt: x.UpdatedAt})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// DeleteAgentSession deletes one of the sessions an agent keeps (ACP
// session/delete).
func (g *Gateway) DeleteAgentSession(ctx context.Context, req *acpgatev1.DeleteAgentSessionRequest) (*acpgatev1.DeleteAgentSessionResponse, error) {
	err := g.sessions.WithAgent(ctx, req.GetAgent(), "", func(sess *acp.Session, _ string) error {
		return sess.DeleteSession(ctx, req.GetAcpSessionId())
	})
	if err != nil {
		return nil, err
	}
	return &acpgatev1.DeleteAgentSessionResponse{}, nil
}
