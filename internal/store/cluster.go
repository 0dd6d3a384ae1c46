package store

import (
	"context"
	"errors"
	"time"
)

// Several gateway replicas may share one store (PostgreSQL). A replica
// holds a lease, renewed every few seconds; it owns the turns it began and
// the sessions it opened while its lease lives. When a lease expires (the
// replica was killed, or cut off from the database), a live replica
// reaps it: its running turns are ended with a terminal the reaper
// supplies, and its sessions are released so that another replica can
// re-open them.
//
// Fencing is by epoch: each Join mints a new epoch for the replica, and a
// store writes a turn or a session on behalf of its replica only while the
// lease of the epoch that owns it is live. A partitioned replica that comes
// back can therefore neither extend a turn that was ended for it, nor keep
// writing as the owner of anything it lost: its writes fail with
// ErrFenced, and its Renew with ErrLeaseLost. A write to a turn that has
// ended (reaped, or ended by its owner) fails with ErrEnded rather than
// ErrFenced, whoever writes: that the turn takes no more events is the
// more precise answer, and a writer stops on either.
//
// Before Join a store acts for no replica, as the store of a single
// gateway: nothing is fenced, and the Replica of turns and sessions is
// recorded as "".

// ErrFenced is returned for a write on behalf of a replica whose lease
// has expired, or for a turn or session this replica's epoch does not own.
var ErrFenced = errors.New("this replica no longer owns it: its lease expired")

// ErrLeaseLost is returned by Renew when the lease expired (and may have
// been reaped) or a newer Join of the same replica id superseded it.
var ErrLeaseLost = errors.New("the replica's lease was lost")

// Replica is one gateway replica as its lease records it.
type Replica struct {
	// ID names the replica; stable across its restarts (a host name, a
	// pod name), so that a restarted replica is recognisably the same.
	ID string
	// Address is where other replicas reach it over gRPC
	// (cluster.advertise), host:port.
	Address string
	// Epoch is minted by Join: greater than every earlier epoch of any
	// replica. The fencing token of everything this lease owns.
	Epoch int64
	// Load: open sessions, running turns, and the session limit
	// (limits.max_sessions; 0 for none). Placement reads them.
	Sessions     int
	RunningTurns int
	MaxSessions  int
	// ExpiresAt is when the lease ends unless renewed (the database's
	// clock).
	ExpiresAt time.Time
}

// Cluster is implemented by a store that several replicas share. The store
// instance acts for one replica: after Join, Begin stamps new turns with
// that replica and epoch, PutSession stamps session records, and writes to
// turns and sessions this epoch does not own fail with ErrFenced.
type Cluster interface {
	// Join starts a lease of ttl for r (its ID, Address and load; Epoch
	// and ExpiresAt are ignored) with a new epoch, and makes this store
	// act for it. It returns the replica as recorded.
	Join(ctx context.Context, r Replica, ttl time.Duration) (Replica, error)
	// Renew extends this store's lease by ttl and records the load
	// given; ErrLeaseLost if the lease expired or was superseded.
	Renew(ctx context.Context, sessions, runningTurns int, ttl time.Duration) error
	// Leave ends this store's lease at once (a clean shutdown, after the
	// replica has ended its turns and stopped its agents).
	Leave(ctx context.Context) error
	// Replicas returns the replicas whose lease is live, by ID.
	Replicas(ctx context.Context) ([]Replica, error)
	// Reap ends the leases that expired before now (database clock) and
	// not by Leave, one replica at a time; each is reaped by exactly one
	// caller even when several replicas reap at once. For each: every
	// running turn it owned is ended with terminal(turn), whose Seq must
	// be turn.StoppedSeq(), and its sessions are released (Session.Replica
	// becomes ""). It returns the replicas reaped and the turns ended.
	Reap(ctx context.Context, terminal func(Turn) Event) (reaped []Replica, ended []Turn, err error)
	// ClaimSession makes this replica the owner of session id, if it has
	// no owner or its owner's lease is not live. It returns the record
	// and whether the claim succeeded; ErrNotFound for no such session.
	ClaimSession(ctx context.Context, id string) (Session, bool, error)
	// Self is the replica this store acts for (the zero Replica before
	// Join).
	Self() Replica
}

// Notifier is implemented by a store that another process may write to:
// it wakes readers of a turn when the turn's journal grows or it ends,
// without polling.
type Notifier interface {
	// Changed returns a channel that is closed once turnID's journal may
	// have grown or the turn may have ended, after the call; stop
	// releases it. A reader re-reads the store after each wake, and
	// subscribes again before its next read, so that nothing is missed.
	Changed(ctx context.Context, turnID string) (changed <-chan struct{}, stop func())
}
