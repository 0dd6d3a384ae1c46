package server

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/cluster"
	"github.com/acpgate/acpgate/internal/sessions"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn"
	"github.com/acpgate/acpgate/internal/turn/wire"
	"github.com/acpgate/acpgate/outcome"
)

// startReplicas joins the cluster as id when the configuration says so.
func (g *Gateway) startReplicas(ctx context.Context, id string) error {
	if !g.cfg.Cluster.Enabled() {
		return nil
	}
	r, err := cluster.Join(ctx, cluster.JoinOptions{
		Config:      g.cfg.Cluster,
		TLS:         g.cfg.TLS,
		ID:          id,
		MaxSessions: g.cfg.Limits.MaxSessions,
		Store:       g.store,
		Local:       g.sessions,
		Load:        g.load,
		Terminal:    g.stoppedTerminal,
		Lost:        g.leaseLost,
		Logger:      g.log,
		Metrics:     g.metrics.Cluster(),
	})
	if err != nil {
		return err
	}
	g.replicas = r
	return nil
}

// handOff drops turn r from memory and sees that the store ends it (see
// cluster.Replica.HandOff). Called before r's terminal is delivered from
// memory.
func (g *Gateway) handOff(r *turn.Running) {
	g.turns.Remove(r.Rec.ID)
	g.replicas.HandOff(r.Rec.ID)
}

// leaseLost gives up what this replica owned under the lease it lost:
// another replica reaps its turns (their terminal is the reaper's, the one
// GetTurn and every WatchTurn then read from the store) and re-opens its
// sessions. So its agents stop before the replica joins again, and its
// turns are dropped from memory first, so that no stream reads an ending
// of them from here that the store does not have. Session records stay:
// the reaper releases them. The agents get their stop grace within
// shutdown_grace, and are killed after it.
func (g *Gateway) leaseLost(err error) {
	turns := g.turns.All()
	for _, t := range turns {
		g.turns.Remove(t.Rec.ID)
	}
	for _, t := range turns {
		t.Cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
	defer cancel()
	g.sessions.Disown(ctx)
	g.log.Warn("the agents of this replica's turns and sessions are stopped; joining the cluster again", "turns", len(turns), "err", err)
}

// load is what placement reads of this replica: its open sessions and
// running turns.
func (g *Gateway) load() (sessions, runningTurns int) {
	return g.sessions.Count(), len(g.turns.All())
}

// stoppedTerminal is the terminal of a turn whose gateway stopped without
// ending it: the gateway was killed, or its replica was lost. It is
// numbered above the turn's reservation, past every seq its gateway may
// have sent (see store.Turn.Reserved).
func (g *Gateway) stoppedTerminal(t store.Turn) store.Event {
	return wire.Encode(terminal(outcome.Result{Error: g.interp.GatewayStopped(outcome.Text{})}), t.StoppedSeq())
}

// listReplicaSessions lists the sessions of every replica, oldest first,
// from their records: the ones open here as this replica sees them, the
// ones another live replica runs as OPEN (their live state is their
// owner's; GetSession asks it), and the ones nobody runs as SUSPENDED.
func (g *Gateway) listReplicaSessions(ctx context.Context) (*acpgatev1.ListSessionsResponse, error) {
	recs, err := g.store.Sessions(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "reading the session records: %v", err)
	}
	peers, err := g.replicas.Live(ctx)
	if err != nil {
		return nil, err
	}
	local := make(map[string]*acpgatev1.Session)
	var order []string
	resp := &acpgatev1.ListSessionsResponse{}
	for _, p := range g.sessions.List(ctx) {
		local[p.GetId()] = p
		order = append(order, p.GetId())
	}
	for _, rec := range recs {
		if p, ok := local[rec.ID]; ok {
			resp.Sessions = append(resp.Sessions, p)
			delete(local, rec.ID)
			continue
		}
		if !g.authz.Sees(ctx, rec.Owner) {
			continue
		}
		p := sessions.RecordProto(rec, g.workspaceOf(rec.Agent))
		if slices.ContainsFunc(peers, func(r store.Replica) bool { return r.ID == rec.Replica }) {
			p.State, p.Replica = acpgatev1.SessionState_SESSION_STATE_IDLE, rec.Replica
		}
		resp.Sessions = append(resp.Sessions, p)
	}
	// Open here and not recorded: one-shot sessions.
	for _, id := range order {
		if p, ok := local[id]; ok {
			resp.Sessions = append(resp.Sessions, p)
		}
	}
	return resp, nil
}

// workspaceOf is the workspace of the configured agent named agent; "" for
// none.
func (g *Gateway) workspaceOf(agent string) string {
	a, _ := g.sessions.Agent(agent)
	return a.Workspace
}
