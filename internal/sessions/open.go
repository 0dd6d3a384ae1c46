package sessions

import (
	"cmp"
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
)

// Opening is a session admitted under the limits, with its directory,
// whose agent has not been started yet: Start (or Reopen) starts it, and
// Abandon gives back what it holds when it will not be started.
type Opening struct {
	entry   *agentEntry
	slot    *admission.Slot
	dir     string
	rel     string       // dir relative to the workspace, for the session's record
	tempDir string       // "" when the session runs in a configured workspace
	owner   string       // the principal opening it
	warm    *warmProcess // the warm process taken for it; nil: start cold
	// loadID, when set, is the ACP session to re-open rather than a new
	// one; reopen, when set, is the suspended session being re-opened
	// (claimed), whose id and record the session takes.
	loadID string
	reopen *Suspended
	// want are the settings to apply once the session is open, in order:
	// a re-opened session's recorded ones, then those the caller asked for.
	want []wantedSettings
	// mcp are the caller's MCP servers (package mcpoffer); a session opened with
	// them is not recorded for re-opening.
	mcp []acpsdk.McpServer
}

// Abandon gives back what prepare took, when the session is not started.
func (o *Opening) Abandon() {
	o.slot.Release()
	if o.warm != nil {
		o.warm.discard()
	}
	if o.tempDir != "" {
		_ = os.RemoveAll(o.tempDir)
	}
	if o.reopen != nil {
		o.reopen.unclaim()
	}
}

// Reopens reports whether the opening re-opens a suspended session (see
// Reopen) rather than opening a new one (see Start).
func (o *Opening) Reopens() bool { return o.reopen != nil }

// prepare admits a session of agent and resolves its directory: every
// failure that is the caller's (a gRPC status), before anything is
// started.
func (m *Manager) prepare(ctx context.Context, agent, cwd string) (*Opening, error) {
	if agent == "" {
		return nil, status.Error(codes.InvalidArgument, "agent is required")
	}
	entry, err := m.agents.agentFor(ctx, agent)
	if err != nil {
		return nil, err
	}
	slot, err := m.admit.ReserveSession(access.Caller(ctx).Name, agent, entry.cfg.MaxSessions)
	if err != nil {
		return nil, err
	}
	o := &Opening{entry: entry, slot: slot, owner: access.Caller(ctx).Name}
	if o.warm = entry.takeFresh(cwd); o.warm != nil {
		o.dir, o.tempDir = o.warm.dir, o.warm.tempDir
		return o, nil
	}
	if o.dir, o.rel, o.tempDir, err = sessionDir(entry.cfg, cwd, m.tempDir); err != nil {
		slot.Release()
		return nil, err
	}
	if entry.pool != nil && o.tempDir == "" && !entry.share.hasRoom(o.shareKey()) {
		o.warm = entry.pool.take(o.dir)
	}
	return o, nil
}

// PrepareOneShot checks a one-shot turn's MCP servers, then admits its
// session of agent in cwd, as CreateSession would: every failure that is
// the caller's, as a gRPC status, before anything is started.
func (m *Manager) PrepareOneShot(ctx context.Context, agent, cwd string, servers []*acpgatev1.McpServer) (*Opening, error) {
	mcp, err := m.agents.callerMCP(ctx, agent, servers)
	if err != nil {
		return nil, err
	}
	o, err := m.prepare(ctx, agent, cwd)
	if err != nil {
		return nil, err
	}
	o.mcp = mcp
	return o, nil
}

// Start starts a prepared session's agent and registers the session. An
// error is *acp.Error when the agent caused it; either way o is abandoned.
// A oneShot session serves one turn, and is neither recorded nor closed by
// its idle timeout.
func (m *Manager) Start(ctx context.Context, o *Opening, oneShot bool) (*Live, error) {
	entry := o.entry
	var replayed atomic.Int64
	sess, err := entry.startAgent(ctx, o, acp.OpenOptions{Cwd: o.dir, LoadSessionID: o.loadID, MCPServers: o.mcp,
		// The history a session/load replays is the client's already;
		// it is not streamed to anyone.
		Replay: func(*acpgatev1.PromptEvent) { replayed.Add(1) }}, m.log)
	if err != nil {
		var agentErr *acp.Error
		if errors.As(err, &agentErr) && agentErr.Info != nil {
			entry.noteCapabilities(*agentErr.Info)
		}
		o.Abandon()
		return nil, err
	}
	entry.noteCapabilities(sess.Info())
	callerMode := ""
	for _, w := range o.want {
		callerMode = cmp.Or(w.mode, callerMode)
		if err := w.apply(ctx, m.log, sess); err != nil {
			sess.Close()
			o.Abandon()
			return nil, err
		}
	}
	if err := matchApproval(ctx, m.log, entry.cfg.PermissionPolicy, callerMode, sess); err != nil {
		sess.Close()
		o.Abandon()
		return nil, err
	}
	now := time.Now()
	live := &Live{sess: sess, agent: entry, slot: o.slot, owner: o.owner, oneShot: oneShot, tempDir: o.tempDir, created: now, lastActive: now, resumed: o.loadID != "", replica: m.replica}
	entry.m.SessionOpened()
	if !m.register(ctx, live, o) {
		live.close()
		if o.reopen != nil {
			o.reopen.unclaim()
		}
		return nil, status.Error(codes.Unavailable, msgShuttingDown)
	}
	attrs := []any{"agent", entry.cfg.Name, "session", live.id, "acp_session", sess.ID(), "cwd", sess.Cwd(), "pid", sess.Pid(), "one_shot", oneShot, "warm", o.warm != nil, "kept", live.rec != nil}
	if o.loadID != "" {
		attrs = append(attrs, "reopened_with", sess.Info().ReopenMethod(), "replayed_events", replayed.Load())
	}
	m.log.InfoContext(ctx, "session opened", attrs...)
	m.watchSettings(live)
	return live, nil
}

// Create opens a session for CreateSession: it starts an agent and opens
// a session on it, or re-opens the suspended session load_session_id
// names. Errors are gRPC status errors, or *acp.Error when the agent
// caused the failure (see StatusOf).
func (m *Manager) Create(ctx context.Context, req *acpgatev1.CreateSessionRequest) (*Live, error) {
	want := wantedSettings{mode: req.GetModeId(), options: req.GetConfigOptions(), strict: true}
	mcp, err := m.agents.callerMCP(ctx, req.GetAgent(), req.GetMcpServers())
	if err != nil {
		return nil, err
	}
	susp, err := m.suspendedToLoad(ctx, req.GetAgent(), req.GetLoadSessionId())
	if err != nil {
		return nil, err
	}
	if susp != nil {
		// Re-opened, then set as the caller asked.
		o, err := m.PrepareReopen(ctx, susp)
		if err != nil {
			return nil, err
		}
		o.want, o.mcp = append(o.want, want), mcp
		return m.Reopen(ctx, o)
	}
	o, err := m.prepare(ctx, req.GetAgent(), req.GetCwd())
	if err != nil {
		return nil, err
	}
	o.loadID, o.want, o.mcp = req.GetLoadSessionId(), append(o.want, want), mcp
	return m.Start(ctx, o, false)
}

// Lookup finds an open session the caller may see; NOT_FOUND otherwise,
// worded as for an id that does not exist.
func (m *Manager) Lookup(ctx context.Context, id string) (*Live, error) {
	live, err := m.reg.lookup(id)
	if err != nil {
		return nil, err
	}
	if !m.authz.Sees(ctx, live.owner) {
		return nil, errNoSession(id)
	}
	return live, nil
}

// Holds reports whether session id is open or suspended here, whoever
// may see it: a replica serves the calls about its own sessions.
func (m *Manager) Holds(id string) bool {
	_, err := m.reg.lookup(id)
	return err == nil || m.reg.lookupSuspended(id) != nil
}

// Count is how many sessions are open here, for the replicas' placement.
func (m *Manager) Count() int { return len(m.reg.all()) }

// List is every open and suspended session the caller may see, oldest
// first.
func (m *Manager) List(ctx context.Context) []*acpgatev1.Session {
	var out []*acpgatev1.Session
	for _, l := range m.reg.listing() {
		if m.authz.Sees(ctx, l.ownedBy()) {
			out = append(out, l.Proto())
		}
	}
	return out
}

// CloseSession closes a session the caller may see, cancelling its turn
// first, or forgets a suspended one.
func (m *Manager) CloseSession(ctx context.Context, id string) error {
	live, err := m.Lookup(ctx, id)
	if err == nil {
		m.removeWith(live, live.end)
		return nil
	}
	susp := m.Suspended(ctx, id)
	if susp == nil {
		return err
	}
	if !susp.claim() {
		return errReopening(susp.rec.ID)
	}
	m.forget(susp)
	return nil
}

// Claim claims a session the caller may see for turn turnID: an open one,
// or a suspended one to re-open (claimed too; see PrepareReopen).
func (m *Manager) Claim(ctx context.Context, id, turnID string) (*Live, *Suspended, error) {
	live, err := m.Lookup(ctx, id)
	gone := false
	if err == nil {
		select {
		case <-live.sess.Done():
			// Its agent has gone; the janitor has not swept it yet. It is
			// suspended (by this call or a concurrent one) when it can be
			// re-opened, and has ended otherwise.
			if gone = !m.suspend(live, "its agent has gone"); gone {
				m.Remove(live)
			}
		default:
			if !live.Claim(turnID) {
				return nil, nil, status.Errorf(codes.FailedPrecondition, "session %q is already running a turn (ACP allows one at a time)", id)
			}
			return live, nil, nil
		}
	}
	susp := m.Suspended(ctx, id)
	switch {
	case susp == nil && gone:
		return nil, nil, status.Errorf(codes.NotFound, "session %q has ended: its agent is gone", id)
	case susp == nil:
		return nil, nil, errNoSession(id)
	}
	if !susp.claim() {
		return nil, nil, errReopening(id)
	}
	return nil, susp, nil
}

// Remove unregisters a session and closes it: it has ended for good, and
// its record goes too, unless the gateway is stopping (then every session
// is closed, and the kept ones are re-opened after the restart).
//
// Only the call that unregisters live deletes the record: a session another
// call suspended or removed meanwhile is that call's.
func (m *Manager) Remove(live *Live) { m.removeWith(live, live.close) }

// removeWith is Remove, stopping the session with stop.
func (m *Manager) removeWith(live *Live, stop func() bool) {
	registered := m.reg.delete(live)
	if stop() {
		m.log.Info("session closed", "agent", live.agent.cfg.Name, "session", live.id)
	}
	if rec := live.record(); registered && rec != nil && (!m.admit.IsDraining() || live.tempDir != "") {
		m.unrecord(rec.ID)
	}
}
