package acp

import (
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// sessionUsage is what an agent reported about a whole session's use: the
// token counts of its turns' session/prompt answers, summed, and the last
// usage_update (context window and cost; ACP's cost is already the
// session's cumulative cost), in or outside a turn. A caller reads it on
// Session, so that it need not add up every turn's outcome itself.
type sessionUsage struct {
	u *acpgatev1.Usage // nil until the agent reports anything
}

// update records a usage_update.
func (s *sessionUsage) update(reported *acpgatev1.Usage) {
	u := s.ensure()
	u.ContextSize, u.ContextUsed = reported.ContextSize, reported.ContextUsed
	if reported.CostAmount != nil {
		u.CostAmount, u.CostCurrency = reported.CostAmount, reported.CostCurrency
	}
}

// addTurn adds a turn's token counts.
func (s *sessionUsage) addTurn(turn *acpgatev1.Usage) {
	if turn == nil || (turn.InputTokens == nil && turn.OutputTokens == nil && turn.TotalTokens == nil &&
		turn.ThoughtTokens == nil && turn.CachedReadTokens == nil && turn.CachedWriteTokens == nil) {
		return
	}
	u := s.ensure()
	u.InputTokens = sum(u.InputTokens, turn.InputTokens)
	u.OutputTokens = sum(u.OutputTokens, turn.OutputTokens)
	u.TotalTokens = sum(u.TotalTokens, turn.TotalTokens)
	u.ThoughtTokens = sum(u.ThoughtTokens, turn.ThoughtTokens)
	u.CachedReadTokens = sum(u.CachedReadTokens, turn.CachedReadTokens)
	u.CachedWriteTokens = sum(u.CachedWriteTokens, turn.CachedWriteTokens)
}

func (s *sessionUsage) ensure() *acpgatev1.Usage {
	if s.u == nil {
		s.u = &acpgatev1.Usage{}
	}
	return s.u
}

// snapshot is a copy the caller may keep.
func (s *sessionUsage) snapshot() *acpgatev1.Usage {
	if s.u == nil {
		return nil
	}
	return proto.Clone(s.u).(*acpgatev1.Usage)
}

// sum adds b to a; a count never reported stays absent, not zero.
func sum(a, b *int64) *int64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		n := *b
		return &n
	default:
		n := *a + *b
		return &n
	}
}

// Usage returns what the agent reported about the session so far (see
// sessionUsage); nil when it reported nothing.
func (s *Session) Usage() *acpgatev1.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage.snapshot()
}
