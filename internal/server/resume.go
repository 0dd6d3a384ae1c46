package server

import (
	"context"
	"errors"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/store"
)

// Sessions that survive their agent. A session opened in its agent's
// configured workspace (not a temporary directory, which does not outlive
// the gateway) is recorded in the store. When its agent goes away without
// the client closing it — the gateway stops, or the agent exits or is
// stopped by the idle timeout while the session is idle — the session is
// suspended: listed, owned, but without a process. Its next Prompt (or
// CreateSession with its id as load_session_id) starts the agent again and
// re-opens the ACP session (acp.AgentInfo.ReopenMethod: session/resume,
// else session/load with the replayed history dropped), and the first turn
// after that says `resumed` in TurnStarted. An agent that supports neither
// ends that turn with capability_not_supported, and the session with it.
// CloseSession, a turn whose agent fails, or a suspension past its
// retention or beyond limits.max_suspended (see expireSuspended) ends a
// session for good and deletes its record; a gateway that stops keeps
// every record.

// suspendRecorded registers the sessions recorded by the gateway's last
// run as suspended. Records of agents that are no longer configured, or no
// longer have a workspace, are kept in the store but not listed: the
// configuration may come back.
func (g *Gateway) suspendRecorded(ctx context.Context) error {
	recs, err := g.store.Sessions(ctx)
	if err != nil {
		return err
	}
	n := 0
	now := time.Now()
	for _, rec := range recs {
		if rec.SuspendedAt.IsZero() {
			// Open when the gateway stopped: suspended from now on, and
			// its retention counts from now.
			rec.SuspendedAt = now
			if err := g.store.PutSession(ctx, rec); err != nil {
				return err
			}
		}
		entry, ok := g.byName[rec.Agent]
		if !ok || entry.cfg.Workspace == "" {
			if now.Sub(rec.SuspendedAt) >= g.cfg.SuspendedRetention {
				g.log.Info("deleting the record of a suspended session past suspended_retention whose agent is not configured with a workspace", "session", rec.ID, "agent", rec.Agent, "suspended_at", rec.SuspendedAt)
				g.unrecord(rec.ID)
				continue
			}
			g.log.Warn("a recorded session's agent is not configured with a workspace; it stays recorded, until suspended_retention, but cannot be re-opened", "session", rec.ID, "agent", rec.Agent)
			continue
		}
		g.sessions.addSuspended(newSuspended(rec, entry.cfg.Workspace))
		n++
	}
	if n > 0 {
		g.log.Info("sessions open when the gateway last stopped are suspended until their next prompt", "sessions", n)
	}
	return nil
}

// register makes a started session known: under the id of the suspended
// session it re-opens, or under a new id, recorded when it can be
// re-opened later. It reports false when the gateway is draining.
func (g *Gateway) register(ctx context.Context, live *liveSession, o *opening) bool {
	if g.admit.IsDraining() {
		return false
	}
	if susp := o.reopen; susp != nil {
		rec := susp.rec
		rec.SuspendedAt = time.Time{}
		live.owner, live.created, live.rec = rec.Owner, rec.CreatedAt, &rec
		if len(o.mcp) > 0 {
			// Re-opened with a caller's MCP servers, which a record
			// would lack: it is kept no longer (see package mcpoffer).
			live.rec = nil
		}
		if !g.sessions.reopened(live, susp) {
			return false
		}
		if live.rec == nil {
			g.unrecord(rec.ID)
			return true
		}
		// Open again: its record must not carry the old suspension, or a
		// restart would count its retention from then.
		live.recordMu.Lock()
		defer live.recordMu.Unlock()
		if err := g.store.PutSession(ctx, rec); err != nil {
			g.log.ErrorContext(ctx, "a re-opened session's record could not be updated; after a restart its retention counts from its last suspension", "session", rec.ID, "err", err)
		}
		return true
	}
	g.sessions.add(live)
	// Replicas find every session through its record; a gateway on its
	// own records only those it can re-open. A session with a caller's
	// MCP servers is not recorded: their headers may be secrets, which the
	// gateway does not store, and re-opened without them the servers would
	// be dropped silently.
	if live.oneShot || (o.tempDir != "" && g.replicas == nil) || len(o.mcp) > 0 {
		return true
	}
	st := live.sess.Settings()
	rec := store.Session{ID: live.id, Agent: live.agent.cfg.Name, ACPSessionID: live.sess.ID(), Cwd: o.rel, Owner: live.owner, CreatedAt: live.created,
		Mode: st.CurrentMode, ConfigOptions: st.Values()}
	if o.tempDir != "" {
		rec.Cwd = "" // a temporary directory: the session cannot be re-opened
	}
	if err := g.store.PutSession(ctx, rec); err != nil {
		g.log.ErrorContext(ctx, "the session could not be recorded; it will not survive its agent or a restart", "session", live.id, "err", err)
		return true
	}
	if !live.keep(&rec) {
		// Closed while it was being recorded.
		g.unrecord(rec.ID)
	}
	return true
}

// unrecord deletes a session's record.
func (g *Gateway) unrecord(id string) {
	if err := g.store.DeleteSession(context.Background(), id); err != nil {
		g.log.Error("a closed session's record could not be deleted; it will be listed as suspended after a restart", "session", id, "err", err)
	}
}

// suspended finds a suspended session the caller may see; nil otherwise.
func (g *Gateway) suspended(ctx context.Context, id string) *suspendedSession {
	susp := g.sessions.lookupSuspended(id)
	if susp == nil || !g.authz.Sees(ctx, susp.rec.Owner) {
		return nil
	}
	return susp
}

// suspendedToLoad is the suspended session of agent that CreateSession's
// load_session_id names (by id or ACP id), or nil when it names none and
// is an ACP session id for the agent. A session the caller may not see is
// NOT_FOUND, as everywhere: loading its ACP id would hand the caller
// another principal's conversation.
func (g *Gateway) suspendedToLoad(ctx context.Context, agent, id string) (*suspendedSession, error) {
	if id == "" {
		return nil, nil
	}
	susp := g.sessions.findSuspended(agent, id)
	if susp == nil {
		return nil, nil
	}
	if !g.authz.Sees(ctx, susp.rec.Owner) {
		return nil, errNoSession(id)
	}
	if !susp.claim() {
		return nil, errReopening(susp.rec.ID)
	}
	return susp, nil
}

// errReopening is the answer for a suspended session that another call is
// re-opening: like a session running a turn, it takes one at a time.
func errReopening(id string) error {
	return status.Errorf(codes.FailedPrecondition, "session %q is being re-opened by another call", id)
}

// prepareReopen admits the re-opening of a claimed suspended session, as
// prepare admits a new one; on error susp is unclaimed.
func (g *Gateway) prepareReopen(ctx context.Context, susp *suspendedSession) (*opening, error) {
	o, err := g.prepare(ctx, susp.rec.Agent, susp.rec.Cwd)
	if err != nil {
		susp.unclaim()
		return nil, err
	}
	if o.tempDir != "" {
		// The agent lost its workspace since the session was recorded.
		o.abandon()
		susp.unclaim()
		return nil, status.Errorf(codes.FailedPrecondition, "session %q cannot be re-opened: agent %q has no workspace", susp.rec.ID, susp.rec.Agent)
	}
	o.loadID, o.reopen, o.owner = susp.rec.ACPSessionID, susp, susp.rec.Owner
	o.want = []wantedSettings{{mode: susp.rec.Mode, options: susp.rec.ConfigOptions}}
	return o, nil
}

// reopen starts a prepared re-opening. An agent that cannot re-open
// sessions ends the session for good; any other failure leaves it
// suspended, for a later attempt.
func (g *Gateway) reopen(ctx context.Context, o *opening) (*liveSession, error) {
	susp := o.reopen
	live, err := g.start(ctx, o, false)
	var agentErr *acp.Error
	if errors.As(err, &agentErr) && agentErr.Proto.GetCapabilityNotSupported() != nil && susp.claim() {
		g.log.WarnContext(ctx, "a suspended session cannot be re-opened: its agent supports neither session/resume nor session/load; it has ended", "session", susp.rec.ID, "agent", susp.rec.Agent)
		g.forget(susp)
	}
	return live, err
}

// reopenNow re-opens a claimed suspended session for CreateSession, then
// applies the settings the caller asked for.
func (g *Gateway) reopenNow(ctx context.Context, susp *suspendedSession, want wantedSettings, mcp []acpsdk.McpServer) (*liveSession, error) {
	o, err := g.prepareReopen(ctx, susp)
	if err != nil {
		return nil, err
	}
	o.want, o.mcp = append(o.want, want), mcp
	return g.reopen(ctx, o)
}

// forget ends a claimed suspended session for good.
func (g *Gateway) forget(susp *suspendedSession) {
	if g.sessions.deleteSuspended(susp) {
		g.unrecord(susp.rec.ID)
		g.log.Info("suspended session closed", "agent", susp.rec.Agent, "session", susp.rec.ID)
	}
}

// suspend turns live, whose agent has gone or is to be stopped while the
// session is idle, into a suspended session, when it is recorded and its
// agent can re-open it; it reports false (and does nothing) otherwise.
func (g *Gateway) suspend(live *liveSession, why string) bool {
	old := live.record()
	if old == nil || live.tempDir != "" || live.sess.Info().ReopenMethod() == "" {
		return false
	}
	rec := *old
	rec.SuspendedAt = time.Now()
	if !g.sessions.suspend(live, newSuspended(rec, live.agent.cfg.Workspace)) {
		return false
	}
	// The suspension time goes to the store, ordered with the writes of
	// the session's settings, which from now on carry it too.
	live.recordMu.Lock()
	live.setRecord(&rec)
	if err := g.store.PutSession(context.Background(), rec); err != nil {
		g.log.Error("a suspended session's suspension time could not be recorded; after a restart its retention counts from then", "session", rec.ID, "err", err)
	}
	live.recordMu.Unlock()
	live.close()
	g.log.Info("session suspended until its next prompt", "agent", live.agent.cfg.Name, "session", live.id, "why", why, "idle_for", time.Since(live.lastActiveAt()).Round(time.Second))
	return true
}
