package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/cluster"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/metrics"
	"github.com/acpgate/acpgate/outcome"
	"github.com/acpgate/acpgate/store"
)

// replicas is the gateway's part in a cluster of replicas sharing one
// PostgreSQL store (config cluster); nil for a gateway on its own.
//
// The rules, each in one place:
//   - Ownership: a replica owns the sessions whose agents it runs and the
//     turns it began, under its lease (store.Cluster). Calls that need the
//     owner's agent process are forwarded to it (forward.go); reads are
//     answered from the store by whichever replica a call reached.
//   - Loss: a replica whose lease expires is reaped by a live one: its
//     running turns end with the GATEWAY_STOPPED terminal (retryable), its
//     sessions are released and re-opened by whichever replica next
//     needs them (adopt), through session/resume or session/load.
//   - Fencing: a replica that lost its lease stops (Lost), and the store
//     refuses its writes meanwhile (store.ErrFenced).
type replicas struct {
	st      store.Cluster
	lease   *cluster.Lease
	peers   *cluster.Peers
	secret  cluster.Secret
	self    string
	metrics *metrics.Cluster // nil: none

	lost     chan error // receives the lease's loss, once
	lostOnce sync.Once
}

// startReplicas joins the cluster when the configuration says so.
func (g *Gateway) startReplicas(ctx context.Context) error {
	c := g.cfg.Cluster
	if !c.Enabled() {
		return nil
	}
	st, ok := g.store.(store.Cluster)
	if !ok {
		return errors.New("cluster: the store is not one several replicas can share (use store: postgres)")
	}
	secret, err := cluster.ReadSecret(c.SecretFile)
	if err != nil {
		return err
	}
	id := c.ReplicaID
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return fmt.Errorf("cluster: no replica_id, and the host name is unknown: %w", err)
		}
	}
	var dial []grpc.DialOption
	if g.cfg.TLS.Enabled() {
		opt, err := cluster.TLSDial(c.CAFile, g.cfg.TLS.CertFile, g.cfg.TLS.KeyFile)
		if err != nil {
			return err
		}
		dial = append(dial, opt)
	}
	r := &replicas{st: st, peers: cluster.NewPeers(dial...), secret: secret, self: id, metrics: g.metrics.Cluster(), lost: make(chan error, 1)}
	r.lease, err = cluster.StartLease(ctx, cluster.LeaseOptions{
		Store:    st,
		Self:     store.Replica{ID: id, Address: c.Advertise, MaxSessions: g.cfg.Limits.MaxSessions},
		TTL:      c.LeaseTTL,
		Load:     g.load,
		Terminal: g.stoppedTerminal,
		Lost: func(err error) {
			r.lostOnce.Do(func() { r.lost <- err })
		},
		Logger:  g.log,
		Metrics: g.metrics.Cluster(),
	})
	if err != nil {
		r.peers.Close()
		return err
	}
	g.replicas = r
	g.log.Info("joined the cluster", "replica", id, "advertise", c.Advertise, "epoch", r.lease.Self().Epoch, "lease_ttl", c.LeaseTTL)
	return nil
}

// Lost receives an error when this replica has lost its lease
// and must stop; nil (never ready) for a gateway on its own.
func (g *Gateway) Lost() <-chan error {
	if g.replicas == nil {
		return nil
	}
	return g.replicas.lost
}

// stopReplicas leaves the cluster once the gateway has ended its turns.
func (g *Gateway) stopReplicas(ctx context.Context) {
	if g.replicas == nil {
		return
	}
	g.replicas.lease.Stop(ctx)
	g.replicas.peers.Close()
}

// load is what placement reads of this replica: its open sessions and
// running turns.
func (g *Gateway) load() (sessions, runningTurns int) {
	return len(g.sessions.all()), len(g.turns.all())
}

// stoppedTerminal is the terminal of a turn whose gateway stopped without
// ending it: the gateway was killed, or its replica was lost. It is
// numbered above the turn's reservation, past every seq its gateway may
// have sent (see store.Turn.Reserved).
func (g *Gateway) stoppedTerminal(t store.Turn) store.Event {
	return encodeEvent(terminal(outcome.Result{Error: g.interp.GatewayStopped(outcome.Text{})}), t.StoppedSeq())
}

// live is the other replicas with a live lease, by ID; UNAVAILABLE when
// the store cannot say.
func (r *replicas) live(ctx context.Context) ([]store.Replica, error) {
	all, err := r.st.Replicas(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "reading the replicas: %v", err)
	}
	return slices.DeleteFunc(all, func(x store.Replica) bool { return x.ID == r.self }), nil
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
	peers, err := g.replicas.live(ctx)
	if err != nil {
		return nil, err
	}
	local := make(map[string]*acpgatev1.Session)
	var order []string
	resp := &acpgatev1.ListSessionsResponse{}
	for _, l := range g.sessions.listing() {
		if g.authz.sees(ctx, l.ownedBy()) {
			p := l.proto()
			local[p.GetId()] = p
			order = append(order, p.GetId())
		}
	}
	for _, rec := range recs {
		if p, ok := local[rec.ID]; ok {
			resp.Sessions = append(resp.Sessions, p)
			delete(local, rec.ID)
			continue
		}
		if !g.authz.sees(ctx, rec.Owner) {
			continue
		}
		p := newSuspended(rec, g.workspaceOf(rec.Agent)).proto()
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
	if e, ok := g.byName[agent]; ok {
		return e.cfg.Workspace
	}
	return ""
}
