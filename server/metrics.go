package server

import (
	"errors"
	"time"

	"github.com/acpgate/acpgate/acp"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/metrics"
	"github.com/acpgate/acpgate/outcome"
)

// agentMetrics is the instruments of the agent named; nil (recording
// nothing) without metrics or for an agent not configured.
func (g *Gateway) agentMetrics(name string) *metrics.Agent {
	if e := g.byName[name]; e != nil {
		return e.m
	}
	return nil
}

// noteTurnEnd records a turn's terminal; live is its session, nil when
// its agent did not start.
func (g *Gateway) noteTurnEnd(r *runningTurn, live *liveSession, result outcome.Result) {
	m := g.agentMetrics(r.rec.Agent)
	if m == nil {
		return
	}
	class, reason := metrics.Classify(result.Error)
	u := result.Outcome.GetUsage()
	m.TurnEnded(class, reason, time.Since(r.rec.StartedAt), u.GetInputTokens(), u.GetOutputTokens())
	if live != nil && u.CostAmount != nil {
		// The cost ACP reports is the session's, cumulative: count what
		// this turn added.
		total := u.GetCostAmount()
		added := total - live.costReported
		if added < 0 {
			added = total
		}
		live.costReported = total
		m.Cost(u.GetCostCurrency(), added)
	}
}

// noteStart records an agent start-up that took took and failed with err
// (nil: it succeeded).
func noteStart(m *metrics.Agent, took time.Duration, err error) {
	if err == nil {
		m.Started(took)
		return
	}
	var agentErr *acp.Error
	class := "cancelled"
	if errors.As(err, &agentErr) {
		class, _ = metrics.Classify(agentErr.Proto)
	}
	m.StartFailed(class)
}

// isAgentMessageChunk reports whether e is a chunk of the agent's answer.
func isAgentMessageChunk(e *acpgatev1.PromptEvent) bool {
	_, ok := e.GetEvent().(*acpgatev1.PromptEvent_AgentMessageChunk)
	return ok
}
