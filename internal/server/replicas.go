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
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/cluster"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/sessions"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
	"github.com/acpgate/acpgate/outcome"
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
//   - Fencing: the store refuses the writes of a replica whose lease has
//     expired (store.ErrFenced). A replica that finds its lease lost
//     (leaseLost) stops the agents of everything it owned, whose endings
//     are the reaper's to write, and joins again with a new epoch: it
//     stays up, and its health is NOT_SERVING until it has joined.
type replicas struct {
	st      store.Cluster
	lease   *cluster.Lease
	peers   *cluster.Peers
	secret  cluster.Secret
	self    string
	metrics *metrics.Cluster // nil: none

	mu     sync.Mutex
	health *health.Server // the gRPC server's, once there is one
	lost   bool           // the lease is lost and not yet joined again

	stopped bool           // under mu: stop is closed, no endHandedOff starts
	stop    chan struct{}  // closed when the gateway stops: endHandedOff returns
	wg      sync.WaitGroup // the endHandedOff goroutines
}

// goEnd runs f on a goroutine of the gateway's cluster part, waited for
// when the gateway stops; it does not run once the gateway has stopped.
func (r *replicas) goEnd(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// replicaID is the ID this gateway joins the cluster under: its
// cluster.replica_id, else the host name; "" when it runs on its own. The
// sessions it opens carry it, so it is known before it joins.
func replicaID(c config.Cluster) (string, error) {
	if !c.Enabled() {
		return "", nil
	}
	if c.ReplicaID != "" {
		return c.ReplicaID, nil
	}
	id, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("cluster: no replica_id, and the host name is unknown: %w", err)
	}
	return id, nil
}

// startReplicas joins the cluster as id when the configuration says so.
func (g *Gateway) startReplicas(ctx context.Context, id string) error {
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
	var dial []grpc.DialOption
	if g.cfg.TLS.Enabled() {
		opt, err := cluster.TLSDial(c.CAFile, g.cfg.TLS.CertFile, g.cfg.TLS.KeyFile)
		if err != nil {
			return err
		}
		dial = append(dial, opt)
	}
	r := &replicas{st: st, peers: cluster.NewPeers(dial...), secret: secret, self: id, metrics: g.metrics.Cluster(), stop: make(chan struct{})}
	r.lease, err = cluster.StartLease(ctx, cluster.LeaseOptions{
		Store:    st,
		Self:     store.Replica{ID: id, Address: c.Advertise, MaxSessions: g.cfg.Limits.MaxSessions},
		TTL:      c.LeaseTTL,
		Load:     g.load,
		Terminal: g.stoppedTerminal,
		Lost:     func(err error) { g.leaseLost(r, err) },
		Rejoined: func(store.Replica) { r.setServing(true) },
		Logger:   g.log,
		Metrics:  g.metrics.Cluster(),
	})
	if err != nil {
		r.peers.Close()
		return err
	}
	g.replicas = r
	g.log.Info("joined the cluster", "replica", id, "advertise", c.Advertise, "epoch", r.lease.Self().Epoch, "lease_ttl", c.LeaseTTL)
	return nil
}

// leaseLost gives up what this replica owned under the lease it lost:
// another replica reaps its turns (their terminal is the reaper's, the one
// GetTurn and every WatchTurn then read from the store) and re-opens its
// sessions. So its agents stop before the replica joins again, and its
// turns are dropped from memory first, so that no stream reads an ending
// of them from here that the store does not have. Session records stay:
// the reaper releases them. The agents get their stop grace within
// shutdown_grace, and are killed after it.
func (g *Gateway) leaseLost(r *replicas, err error) {
	r.setServing(false)
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

// watchHealth makes h report whether this replica holds its lease:
// NOT_SERVING from a loss until it has joined again.
func (g *Gateway) watchHealth(h *health.Server) {
	if g.replicas == nil {
		return
	}
	r := g.replicas
	r.mu.Lock()
	r.health = h
	lost := r.lost
	r.mu.Unlock()
	if lost {
		r.setServing(false)
	}
}

// setServing records whether the replica holds its lease, and says so
// through health.
func (r *replicas) setServing(serving bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = !serving
	if r.health == nil {
		return
	}
	st := healthpb.HealthCheckResponse_SERVING
	if !serving {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	r.health.SetServingStatus("", st)
	r.health.SetServingStatus(ServiceName, st)
}

// stopReplicas leaves the cluster once the gateway has ended its turns.
func (g *Gateway) stopReplicas(ctx context.Context) {
	if g.replicas == nil {
		return
	}
	r := g.replicas
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.stop)
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.lease.Stop(ctx)
	r.peers.Close()
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
