package acp

import (
	"context"
	"encoding/json"
)

// MethodClose asks an agent to close one session (ACP session/close, when
// it advertised sessionCapabilities.close).
const MethodClose = "session/close"

type closeParams struct {
	Meta      map[string]any `json:"_meta,omitempty"`
	SessionID string         `json:"sessionId"`
}

// End is Close for a session its client is done with (CloseSession): once
// a running turn has ended, an agent that advertised
// sessionCapabilities.close is asked to close the session, within the
// cancel grace, so that it frees what it holds for it the way it chooses;
// then the agent is stopped as Close stops it. Close alone (a shutdown, an
// idle timeout, a lost client) does not ask: such a session may be
// re-opened later, and an agent asked to close it might forget it.
func (s *Session) End() { s.shut(true) }

// closeOnAgent sends session/close when the agent advertised it. A failure
// is logged and the agent is stopped anyway: the client asked for the
// session to end, and it does.
func (s *Session) closeOnAgent() {
	id := s.ID()
	if s.info.Capabilities.SessionCapabilities.Close == nil || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CancelGrace)
	defer cancel()
	var out json.RawMessage
	if err := s.call(ctx, MethodClose, func(meta map[string]any) any {
		return closeParams{Meta: meta, SessionID: id}
	}, &out); err != nil {
		s.log.Warn("the agent did not close its session; stopping it anyway", "err", err)
	}
}
