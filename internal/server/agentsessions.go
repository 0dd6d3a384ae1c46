package server

import (
	"context"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
)

// ListAgentSessions lists one page of the sessions an agent keeps (ACP
// session/list).
func (g *Gateway) ListAgentSessions(ctx context.Context, req *acpgatev1.ListAgentSessionsRequest) (*acpgatev1.ListAgentSessionsResponse, error) {
	resp := &acpgatev1.ListAgentSessionsResponse{}
	err := g.withAgent(ctx, req.GetAgent(), req.GetCwd(), func(sess *acp.Session, dir string) error {
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
	err := g.withAgent(ctx, req.GetAgent(), "", func(sess *acp.Session, _ string) error {
		return sess.DeleteSession(ctx, req.GetAcpSessionId())
	})
	if err != nil {
		return nil, err
	}
	return &acpgatev1.DeleteAgentSessionResponse{}, nil
}

// withAgent runs f on an agent started for one call about the sessions it
// keeps, in cwd (relative to its workspace, as CreateSession's) or its
// usual directory, and stops it after. The agent holds a session slot
// while it runs, so that such calls cannot start more agents than the
// limits allow. An error of f's is a gRPC status.
func (g *Gateway) withAgent(ctx context.Context, agent, cwd string, f func(sess *acp.Session, dir string) error) error {
	entry, err := g.agentFor(ctx, agent)
	if err != nil {
		return err
	}
	if cwd != "" && entry.cfg.Workspace == "" {
		return status.Errorf(codes.InvalidArgument, "cwd %q: agent %q has no workspace for it to be relative to", cwd, entry.cfg.Name)
	}
	slot, err := g.admit.ReserveSession(access.Caller(ctx).Name, entry.cfg.Name, entry.cfg.MaxSessions)
	if err != nil {
		return err
	}
	defer slot.Release()
	dir, _, tempDir, err := sessionDir(entry.cfg, cwd, g.tempDir)
	if err != nil {
		return err
	}
	if tempDir != "" {
		defer os.RemoveAll(tempDir)
	}
	sess, err := acp.Start(ctx, entry.acp, dir)
	if err != nil {
		return statusOf(err)
	}
	defer sess.Close()
	entry.noteCapabilities(sess.Info())
	if err := f(sess, dir); err != nil {
		return statusOf(err)
	}
	return nil
}
