package acp

import (
	"context"
	"encoding/json"
	"slices"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/translate"
)

// ProtocolVersion is the ACP protocol version the gateway speaks.
const ProtocolVersion = 1

// Methods that re-open a session; see AgentInfo.ReopenMethod.
const (
	MethodResume = "session/resume"
	MethodLoad   = "session/load"
)

// AgentInfo is what the agent said about itself at initialize.
type AgentInfo struct {
	ProtocolVersion int
	Name            string
	Version         string
	Capabilities    acpsdk.AgentCapabilities
	AuthMethods     []string
	// DeleteSessions is sessionCapabilities.delete (session/delete),
	// which Capabilities cannot hold: the SDK's types lack it.
	DeleteSessions bool
}

// ReopenMethod is how the agent can re-open a session, or "" when it
// cannot: session/resume when it advertised sessionCapabilities.resume,
// since that restores the session without replaying its history (which the
// gateway would only discard); else session/load when it advertised
// loadSession.
func (info AgentInfo) ReopenMethod() string {
	switch {
	case info.Capabilities.SessionCapabilities.Resume != nil:
		return MethodResume
	case info.Capabilities.LoadSession:
		return MethodLoad
	}
	return ""
}

// initializeResult decodes the parts of InitializeResponse the gateway
// uses. authMethods are decoded by id only: agents describe them in shapes
// that vary between protocol revisions, and only the id is needed.
type initializeResult struct {
	ProtocolVersion   int                      `json:"protocolVersion"`
	AgentCapabilities acpsdk.AgentCapabilities `json:"agentCapabilities"`
	AgentInfo         *acpsdk.Implementation   `json:"agentInfo"`
	AuthMethods       []struct {
		ID string `json:"id"`
	} `json:"authMethods"`
	// deleteSessions is sessionCapabilities.delete, which the SDK's
	// types do not have yet.
	deleteSessions bool
}

func (r *initializeResult) UnmarshalJSON(b []byte) error {
	type plain initializeResult
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	var extra struct {
		AgentCapabilities struct {
			SessionCapabilities struct {
				Delete json.RawMessage `json:"delete"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	}
	if json.Unmarshal(b, &extra) == nil {
		d := string(extra.AgentCapabilities.SessionCapabilities.Delete)
		r.deleteSessions = d != "" && d != "null"
	}
	return nil
}

// hello runs initialize, then authenticate when configured.
func (s *Session) hello(ctx context.Context) error {
	var init initializeResult
	if err := s.call(ctx, "initialize", func(meta map[string]any) any {
		return acpsdk.InitializeRequest{
			Meta:            meta,
			ProtocolVersion: ProtocolVersion,
			ClientCapabilities: acpsdk.ClientCapabilities{
				Fs:          acpsdk.FileSystemCapabilities{ReadTextFile: s.cfg.FS.Read, WriteTextFile: s.cfg.FS.Write},
				Terminal:    false,
				Elicitation: s.cfg.Elicitation.Capabilities(),
			},
			ClientInfo: &acpsdk.Implementation{Name: "acpgate", Version: s.cfg.ClientVersion},
		}
	}, &init); err != nil {
		return err
	}
	if init.ProtocolVersion != ProtocolVersion {
		return &Error{Proto: s.interp.UnsupportedProtocolVersion(init.ProtocolVersion, ProtocolVersion)}
	}
	s.info = AgentInfo{ProtocolVersion: init.ProtocolVersion, Capabilities: init.AgentCapabilities, DeleteSessions: init.deleteSessions}
	if init.AgentInfo != nil {
		s.info.Name, s.info.Version = init.AgentInfo.Name, init.AgentInfo.Version
	}
	for _, m := range init.AuthMethods {
		s.info.AuthMethods = append(s.info.AuthMethods, m.ID)
	}
	if m := s.cfg.AuthMethod; m != "" {
		if !slices.Contains(s.info.AuthMethods, m) {
			return &Error{Proto: s.interp.AuthMethodNotAdvertised(m, s.info.AuthMethods)}
		}
		var ignored json.RawMessage
		if err := s.call(ctx, "authenticate", func(meta map[string]any) any {
			return acpsdk.AuthenticateRequest{Meta: meta, MethodId: m}
		}, &ignored); err != nil {
			return err
		}
	}
	return nil
}

// begin runs session/new, or session/load when opts.LoadSessionID is set,
// one session of the process at a time; the session is routed to by its
// id once it is open.
func (s *Session) begin(ctx context.Context, opts OpenOptions) error {
	c := s.host
	c.openMu.Lock()
	defer c.openMu.Unlock()
	c.openingAs(s)
	if err := s.beginLocked(ctx, opts); err != nil {
		return err
	}
	c.opened(s, s.ID())
	return nil
}

// beginLocked is begin, with the process's openMu held.
func (s *Session) beginLocked(ctx context.Context, opts OpenOptions) error {
	mcp, err := s.sessionMCP(opts)
	if err != nil {
		return err
	}
	if opts.LoadSessionID == "" {
		var result json.RawMessage
		if err := s.call(ctx, "session/new", func(meta map[string]any) any {
			return acpsdk.NewSessionRequest{Meta: meta, Cwd: s.cwd, McpServers: mcp}
		}, &result); err != nil {
			return err
		}
		var created struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(result, &created); err != nil {
			return &Error{Proto: s.interp.MalformedResult("session/new", err.Error(), result)}
		}
		if created.SessionID == "" {
			return &Error{Proto: s.interp.MalformedResult("session/new", "sessionId is empty", nil)}
		}
		s.settings.adopt(result, s.log)
		s.setID(created.SessionID)
		return nil
	}
	method := s.info.ReopenMethod()
	if method == "" {
		return &Error{Proto: s.interp.ReopenNotSupported()}
	}
	// The id is known before the call so the replayed history, which
	// names it, is recognised as this session's.
	s.mu.Lock()
	s.id, s.replay = opts.LoadSessionID, opts.Replay
	s.mu.Unlock()
	var result json.RawMessage
	id := acpsdk.SessionId(opts.LoadSessionID)
	err = s.call(ctx, method, func(meta map[string]any) any {
		if method == MethodResume {
			return acpsdk.ResumeSessionRequest{Meta: meta, SessionId: id, Cwd: s.cwd, McpServers: mcp}
		}
		return acpsdk.LoadSessionRequest{Meta: meta, SessionId: id, Cwd: s.cwd, McpServers: mcp}
	}, &result)
	s.mu.Lock()
	s.replay = nil
	s.mu.Unlock()
	if err == nil {
		s.settings.adopt(result, s.log)
	}
	return err
}

func (s *Session) setID(id string) {
	s.mu.Lock()
	s.id = id
	if s.early.sessionID == id {
		if s.early.commands != nil {
			s.commands = s.early.commands
		}
		s.settings.apply(s.early.settings)
	}
	s.early = earlyUpdates{}
	s.mu.Unlock()
}

// earlyUpdates are the session state an agent sent for a session before
// its id was known to the gateway: sent right after answering session/new,
// and read before Open recorded the id. Only the last of each kind counts,
// as it would have later.
type earlyUpdates struct {
	sessionID string
	commands  *acpgatev1.AvailableCommands
	settings  translate.SettingsUpdate
}

// keep records u's state for the session it names, dropping what was kept
// for another one.
func (e *earlyUpdates) keep(sessionID string, u translate.Update) {
	if e.sessionID != sessionID {
		*e = earlyUpdates{sessionID: sessionID}
	}
	if u.Commands != nil {
		e.commands = u.Commands
	}
	e.settings.Merge(u.Settings)
}
