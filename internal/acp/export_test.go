package acp

import (
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// What the tests read of a session that the gateway does not.

// Stats returns the agent connection's counters.
func (s *Session) Stats() jsonrpc.Stats { return s.conn.Stats() }

// Containment returns how the agent's process tree is held.
func (s *Session) Containment() agentproc.Containment { return s.proc.Containment() }
