package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
)

// Replica is a gateway's part in a cluster of replicas sharing one
// PostgreSQL store (config cluster).
//
// The rules, each in one place:
//   - Ownership: a replica owns the sessions whose agents it runs and the
//     turns it began, under its lease (store.Cluster). Calls that need the
//     owner's agent process are forwarded to it (router.go); reads are
//     answered from the store by whichever replica a call reached.
//   - Loss: a replica whose lease expires is reaped by a live one: its
//     running turns end with the GATEWAY_STOPPED terminal (retryable), its
//     sessions are released and re-opened by whichever replica next
//     needs them (adopt), through session/resume or session/load.
//   - Fencing: the store refuses the writes of a replica whose lease has
//     expired (store.ErrFenced). A replica that finds its lease lost
//     (JoinOptions.Lost) stops the agents of everything it owned, whose
//     endings are the reaper's to write, and joins again with a new
//     epoch: it stays up, and its health is NOT_SERVING until it has
//     joined.
//   - Hand-off: a turn whose journal the store refused is ended by the
//     store's terminal, not one from memory (handoff.go).
type Replica struct {
	o       JoinOptions
	st      store.Cluster
	lease   *Lease
	peers   *Peers
	secret  Secret
	metrics *metrics.Cluster // nil: none

	mu     sync.Mutex
	health *health.Server // the gRPC server's, once there is one
	lost   bool           // the lease is lost and not yet joined again

	stopped bool           // under mu: stop is closed, no hand-off starts
	stop    chan struct{}  // closed when the gateway stops: hand-offs return
	wg      sync.WaitGroup // the hand-off goroutines
}

// Local is what forwarding needs of the replica's own sessions.
type Local interface {
	// Holds reports whether this replica runs session id, open or
	// suspended.
	Holds(id string) bool
	// Adopt registers as suspended here a session this replica has
	// claimed from the store (no live replica ran it), or says why it
	// cannot be re-opened here.
	Adopt(ctx context.Context, rec store.Session) error
}

// JoinOptions are what a replica joins the cluster with.
type JoinOptions struct {
	// Config is the cluster's configuration; TLS, when enabled, is used
	// for the calls to other replicas too.
	Config config.Cluster
	TLS    config.TLS
	// ID is this replica's (ReplicaID).
	ID string
	// MaxSessions is limits.max_sessions, which placement reads.
	MaxSessions int
	// Store is the gateway's store: one several replicas can share.
	Store store.Store
	// Local is this replica's sessions, for forwarding.
	Local Local
	// Load, Terminal and Lost are the lease's (LeaseOptions). Lost is
	// called after the replica has stopped serving.
	Load     func() (sessions, runningTurns int)
	Terminal func(store.Turn) store.Event
	Lost     func(error)
	Logger   *slog.Logger
	Metrics  *metrics.Cluster
}

// ReplicaID is the ID a gateway joins the cluster under: its
// cluster.replica_id, else the host name; "" when it runs on its own. The
// sessions it opens carry it, so it is known before it joins.
func ReplicaID(c config.Cluster) (string, error) {
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

// Join joins the cluster as o.ID and holds the lease until Stop.
func Join(ctx context.Context, o JoinOptions) (*Replica, error) {
	c := o.Config
	st, ok := o.Store.(store.Cluster)
	if !ok {
		return nil, errors.New("cluster: the store is not one several replicas can share (use store: postgres)")
	}
	secret, err := ReadSecret(c.SecretFile)
	if err != nil {
		return nil, err
	}
	var dial []grpc.DialOption
	if o.TLS.Enabled() {
		opt, err := TLSDial(c.CAFile, o.TLS.CertFile, o.TLS.KeyFile)
		if err != nil {
			return nil, err
		}
		dial = append(dial, opt)
	}
	r := &Replica{o: o, st: st, peers: NewPeers(dial...), secret: secret, metrics: o.Metrics, stop: make(chan struct{})}
	r.lease, err = StartLease(ctx, LeaseOptions{
		Store:    st,
		Self:     store.Replica{ID: o.ID, Address: c.Advertise, MaxSessions: o.MaxSessions},
		TTL:      c.LeaseTTL,
		Load:     o.Load,
		Terminal: o.Terminal,
		Lost: func(err error) {
			r.setServing(false)
			o.Lost(err)
		},
		Rejoined: func(store.Replica) { r.setServing(true) },
		Logger:   o.Logger,
		Metrics:  o.Metrics,
	})
	if err != nil {
		r.peers.Close()
		return nil, err
	}
	o.Logger.Info("joined the cluster", "replica", o.ID, "advertise", c.Advertise, "epoch", r.lease.Self().Epoch, "lease_ttl", c.LeaseTTL)
	return r, nil
}

// ID is this replica's.
func (r *Replica) ID() string { return r.o.ID }

// goEnd runs f on a goroutine of the replica's, waited for by Stop; it
// does not run once the replica has stopped.
func (r *Replica) goEnd(f func()) {
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

// WatchHealth makes h report whether this replica holds its lease:
// NOT_SERVING from a loss until it has joined again.
func (r *Replica) WatchHealth(h *health.Server) {
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
func (r *Replica) setServing(serving bool) {
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
	r.health.SetServingStatus(access.ServiceName, st)
}

// Stop leaves the cluster once the gateway has ended its turns.
func (r *Replica) Stop(ctx context.Context) {
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

// Live is the other replicas with a live lease, by ID; UNAVAILABLE when
// the store cannot say.
func (r *Replica) Live(ctx context.Context) ([]store.Replica, error) {
	all, err := r.st.Replicas(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "reading the replicas: %v", err)
	}
	return slices.DeleteFunc(all, func(x store.Replica) bool { return x.ID == r.o.ID }), nil
}
