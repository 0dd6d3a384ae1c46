package sessions

import (
	"context"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
)

// WithAgent runs f on an agent started for one call about the sessions it
// keeps, in cwd (relative to its workspace, as CreateSession's) or its
// usual directory, and stops it after. The agent holds a session slot
// while it runs, so that such calls cannot start more agents than the
// limits allow. The error, f's included, is a gRPC status.
func (m *Manager) WithAgent(ctx context.Context, agent, cwd string, f func(sess *acp.Session, dir string) error) error {
	entry, err := m.agents.agentFor(ctx, agent)
	if err != nil {
		return err
	}
	if cwd != "" && entry.cfg.Workspace == "" {
		return status.Errorf(codes.InvalidArgument, "cwd %q: agent %q has no workspace for it to be relative to", cwd, entry.cfg.Name)
	}
	slot, err := m.admit.ReserveSession(access.Caller(ctx).Name, entry.cfg.Name, entry.cfg.MaxSessions)
	if err != nil {
		return err
	}
	defer slot.Release()
	dir, _, tempDir, err := sessionDir(entry.cfg, cwd, m.tempDir)
	if err != nil {
		return err
	}
	if tempDir != "" {
		defer os.RemoveAll(tempDir)
	}
	sess, err := acp.Start(ctx, entry.acp, dir)
	if err != nil {
		return StatusOf(err)
	}
	defer sess.Close()
	entry.noteCapabilities(sess.Info())
	if err := f(sess, dir); err != nil {
		return StatusOf(err)
	}
	return nil
}
