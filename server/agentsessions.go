package server

import (
	"context"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/acp"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// ListAgentSessions lists one page of the sessions an agent keeps (ACP
// session/list). The agent runs for the call only: started (holding a
// session slot, so that listing cannot start more agents than the limits
// allow), asked, and stopped.
func (g *Gateway) ListAgentSessions(ctx context.Context, req *acpgatev1.ListAgentSessionsRequest) (*acpgatev1.ListAgentSessionsResponse, error) {
	entry, ok := g.byName[req.GetAgent()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no agent named %q is configured", req.GetAgent())
	}
	if err := g.authz.use(ctx, entry.cfg.Name); err != nil {
		return nil, err
	}
	if req.GetCwd() != "" && entry.cfg.Workspace == "" {
		return nil, status.Errorf(codes.InvalidArgument, "cwd %q: agent %q has no workspace for it to be relative to", req.GetCwd(), entry.cfg.Name)
	}
	slot, err := g.admit.reserveSession(caller(ctx).Name, entry.cfg.Name, entry.cfg.MaxSessions)
	if err != nil {
		return nil, err
	}
	defer slot.release()
	dir, _, tempDir, err := sessionDir(entry.cfg, req.GetCwd(), g.tempDir)
	if err != nil {
		return nil, err
	}
	if tempDir != "" {
		defer os.RemoveAll(tempDir)
	}
	sess, err := acp.Start(ctx, entry.acp, dir)
	if err != nil {
		return nil, statusOf(err)
	}
	defer sess.Close()
	entry.noteCapabilities(sess.Info())
	filter := ""
	if req.GetCwd() != "" {
		filter = dir
	}
	page, next, err := sess.ListSessions(ctx, filter, req.GetPageToken())
	if err != nil {
		return nil, statusOf(err)
	}
	resp := &acpgatev1.ListAgentSessionsResponse{NextPageToken: next}
	for _, x := range page {
		resp.Sessions = append(resp.Sessions, &acpgatev1.AgentSession{AcpSessionId: x.ID, Cwd: x.Cwd, Title: x.Title, UpdatedAt: x.UpdatedAt})
	}
	return resp, nil
}
