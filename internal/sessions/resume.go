package sessions

import (
	"context"
	"errors"
	"time"

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

// SuspendRecorded registers the sessions recorded by the gateway's last
// run as suspended: a gateway on its own calls it once, before it serves. Records of agents that are no longer configured, or no
// longer have a workspace, are kept in the store but not listed: the
// configuration may come back.
func (m *Manager) SuspendRecorded(ctx context.Context) error {
	recs, err := m.store.Sessions(ctx)
	if err != nil {
		return err
	}
	n := 0
	now := time.Now()
	for _, rec := range recs {
		if suspendFound(&rec, now) {
			if err := m.store.PutSession(ctx, rec); err != nil {
				return err
			}
		}
		entry, ok := m.agents.byName[rec.Agent]
		if !ok || entry.cfg.Workspace == "" {
			if now.Sub(rec.SuspendedAt) >= m.cfg.SuspendedRetention {
				m.log.Info("deleting the record of a suspended session past suspended_retention whose agent is not configured with a workspace", "session", rec.ID, "agent", rec.Agent, "suspended_at", rec.SuspendedAt)
				m.unrecord(rec.ID)
				continue
			}
			m.log.Warn("a recorded session's agent is not configured with a workspace; it stays recorded, until suspended_retention, but cannot be re-opened", "session", rec.ID, "agent", rec.Agent)
			continue
		}
		m.reg.addSuspended(newSuspended(rec, entry.cfg.Workspace))
		n++
	}
	if n > 0 {
		m.log.Info("sessions open when the gateway last stopped are suspended until their next prompt", "sessions", n)
	}
	return nil
}

// Adopt registers here, as suspended, a session no live replica runs,
// which this replica has claimed in the store: the call that needs it
// re-opens it. A session that cannot be re-opened here (its agent is not
// configured with a workspace) has ended: its record goes, and the error
// says so.
func (m *Manager) Adopt(ctx context.Context, rec store.Session) error {
	entry, ok := m.agents.byName[rec.Agent]
	if !ok || entry.cfg.Workspace == "" || rec.Cwd == "" {
		m.log.WarnContext(ctx, "a session no live replica runs cannot be re-opened here (it ran in a temporary directory, or its agent has no workspace here); it has ended", "session", rec.ID, "agent", rec.Agent)
		m.unrecord(rec.ID)
		return status.Errorf(codes.FailedPrecondition, "session %q has ended: the replica that ran it is gone, and it cannot be re-opened elsewhere (it ran in a temporary directory, or agent %q has no workspace here)", rec.ID, rec.Agent)
	}
	if suspendFound(&rec, time.Now()) {
		// This replica's claim holds the record: written here, the
		// suspension stands for whoever reads it next.
		if err := m.store.PutSession(ctx, rec); err != nil {
			m.log.ErrorContext(ctx, "an adopted session's record could not be updated; the replica that next finds it counts its retention from then", "session", rec.ID, "err", err)
		}
	}
	m.reg.addSuspended(newSuspended(rec, entry.cfg.Workspace))
	m.log.InfoContext(ctx, "adopted a session no live replica runs; it is suspended until its next prompt", "session", rec.ID, "agent", rec.Agent)
	return nil
}

// suspendFound marks rec, a session found open with no agent running it
// (recorded by the gateway's last run, or by a replica that is gone),
// suspended from now, and reports whether it did. Its retention then
// counts from now. Left at the zero time, it would count from then: the
// next sweep of suspended sessions, which may come a millisecond later,
// would end the session before anyone could re-open it.
func suspendFound(rec *store.Session, now time.Time) bool {
	if !rec.SuspendedAt.IsZero() {
		return false
	}
	rec.SuspendedAt = now
	return true
}

// register makes a started session known: under the id of the suspended
// session it re-opens, or under a new id, recorded when it can be
// re-opened later. It reports false when the gateway is draining.
func (m *Manager) register(ctx context.Context, live *Live, o *Opening) bool {
	if m.admit.IsDraining() {
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
		if !m.reg.reopened(live, susp) {
			return false
		}
		if live.rec == nil {
			m.unrecord(rec.ID)
			return true
		}
		// Open again: its record must not carry the old suspension, or a
		// restart would count its retention from then.
		live.recordMu.Lock()
		defer live.recordMu.Unlock()
		if err := m.store.PutSession(ctx, rec); err != nil {
			m.log.ErrorContext(ctx, "a re-opened session's record could not be updated; after a restart its retention counts from its last suspension", "session", rec.ID, "err", err)
		}
		return true
	}
	m.reg.add(live)
	// Replicas find every session through its record; a gateway on its
	// own records only those it can re-open. A session with a caller's
	// MCP servers is not recorded: their headers may be secrets, which the
	// gateway does not store, and re-opened without them the servers would
	// be dropped silently.
	if live.oneShot || (o.tempDir != "" && m.replica == "") || len(o.mcp) > 0 {
		return true
	}
	st := live.sess.Settings()
	rec := store.Session{ID: live.id, Agent: live.agent.cfg.Name, ACPSessionID: live.sess.ID(), Cwd: o.rel, Owner: live.owner, CreatedAt: live.created,
		Mode: st.CurrentMode, ConfigOptions: st.Values()}
	if o.tempDir != "" {
		rec.Cwd = "" // a temporary directory: the session cannot be re-opened
	}
	if err := m.store.PutSession(ctx, rec); err != nil {
		m.log.ErrorContext(ctx, "the session could not be recorded; it will not survive its agent or a restart", "session", live.id, "err", err)
		return true
	}
	if !live.keep(&rec) {
		// Closed while it was being recorded.
		m.unrecord(rec.ID)
	}
	return true
}

// unrecord deletes a session's record.
func (m *Manager) unrecord(id string) {
	if err := m.store.DeleteSession(context.Background(), id); err != nil {
		m.log.Error("a closed session's record could not be deleted; it will be listed as suspended after a restart", "session", id, "err", err)
	}
}

// Suspended finds a suspended session the caller may see; nil otherwise.
func (m *Manager) Suspended(ctx context.Context, id string) *Suspended {
	susp := m.reg.lookupSuspended(id)
	if susp == nil || !m.authz.Sees(ctx, susp.rec.Owner) {
		return nil
	}
	return susp
}

// suspendedToLoad is the suspended session of agent that CreateSession's
// load_session_id names (by id or ACP id), or nil when it names none and
// is an ACP session id for the agent. A session the caller may not see is
// NOT_FOUND, as everywhere: loading its ACP id would hand the caller
// another principal's conversation.
func (m *Manager) suspendedToLoad(ctx context.Context, agent, id string) (*Suspended, error) {
	if id == "" {
		return nil, nil
	}
	susp := m.reg.findSuspended(agent, id)
	if susp == nil {
		return nil, nil
	}
	if !m.authz.Sees(ctx, susp.rec.Owner) {
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

// PrepareReopen admits the re-opening of a claimed suspended session, as
// a new one is admitted; on error susp is unclaimed.
func (m *Manager) PrepareReopen(ctx context.Context, susp *Suspended) (*Opening, error) {
	o, err := m.prepare(ctx, susp.rec.Agent, susp.rec.Cwd)
	if err != nil {
		susp.unclaim()
		return nil, err
	}
	if o.tempDir != "" {
		// The agent lost its workspace since the session was recorded.
		o.Abandon()
		susp.unclaim()
		return nil, status.Errorf(codes.FailedPrecondition, "session %q cannot be re-opened: agent %q has no workspace", susp.rec.ID, susp.rec.Agent)
	}
	o.loadID, o.reopen, o.owner = susp.rec.ACPSessionID, susp, susp.rec.Owner
	o.want = []wantedSettings{{mode: susp.rec.Mode, options: susp.rec.ConfigOptions}}
	return o, nil
}

// Reopen starts a prepared re-opening. An agent that cannot re-open
// sessions ends the session for good; any other failure leaves it
// suspended, for a later attempt.
func (m *Manager) Reopen(ctx context.Context, o *Opening) (*Live, error) {
	susp := o.reopen
	live, err := m.Start(ctx, o, false)
	var agentErr *acp.Error
	if errors.As(err, &agentErr) && agentErr.Proto.GetCapabilityNotSupported() != nil && susp.claim() {
		m.log.WarnContext(ctx, "a suspended session cannot be re-opened: its agent supports neither session/resume nor session/load; it has ended", "session", susp.rec.ID, "agent", susp.rec.Agent)
		m.forget(susp)
	}
	return live, err
}

// forget ends a claimed suspended session for good.
func (m *Manager) forget(susp *Suspended) {
	if m.reg.deleteSuspended(susp) {
		m.unrecord(susp.rec.ID)
		m.log.Info("suspended session closed", "agent", susp.rec.Agent, "session", susp.rec.ID)
	}
}

// suspend turns live, whose agent has gone or is to be stopped while the
// session is idle, into a suspended session, when it is recorded and its
// agent can re-open it; it reports false (and does nothing) otherwise.
func (m *Manager) suspend(live *Live, why string) bool {
	old := live.record()
	if old == nil || live.tempDir != "" || live.sess.Info().ReopenMethod() == "" {
		return false
	}
	rec := *old
	rec.SuspendedAt = time.Now()
	if !m.reg.suspend(live, newSuspended(rec, live.agent.cfg.Workspace)) {
		return false
	}
	// The suspension time goes to the store, ordered with the writes of
	// the session's settings, which from now on carry it too.
	live.recordMu.Lock()
	live.setRecord(&rec)
	if err := m.store.PutSession(context.Background(), rec); err != nil {
		m.log.Error("a suspended session's suspension time could not be recorded; after a restart its retention counts from then", "session", rec.ID, "err", err)
	}
	live.recordMu.Unlock()
	live.close()
	m.log.Info("session suspended until its next prompt", "agent", live.agent.cfg.Name, "session", live.id, "why", why, "idle_for", time.Since(live.lastActiveAt()).Round(time.Second))
	return true
}
