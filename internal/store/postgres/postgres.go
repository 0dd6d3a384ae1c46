// Package postgres is the store.Store in a PostgreSQL database that
// several gateway replicas share (store.Cluster), and that wakes readers
// on every replica when a turn's journal grows (store.Notifier).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acpgate/acpgate/internal/store"
)

// Store is a store.Store in a PostgreSQL database that several gateway
// replicas may share: turns, their journals, session records and the
// replicas' leases are rows there, so that any replica can answer for any
// turn, an idempotency key means one turn across replicas (a unique index
// decides, not timing), and a replica that is lost is reaped by another
// (see store.Cluster). It also implements store.Notifier: a write to a turn's journal
// sends a NOTIFY in its transaction, so that readers on every replica
// wake without polling.
//
// Before Join, a Store acts for no replica and behaves as the
// store of a single gateway: nothing is fenced, and Replica fields are "".
//
// Times of turns and sessions are kept as unix nanoseconds (bigint), as
// the other stores keep them: timestamptz holds microseconds, and a record
// would not read back as the instant it was given. Leases use the
// database's clock (now()), so that replicas whose clocks disagree still
// agree on whose lease is live.
//
// Connections: a pool of at most MaxConns, each with statement_timeout
// set, so that a stuck query (a lock held by a lost client, say) fails
// the call instead of holding a connection forever; plus one dedicated
// connection that LISTENs (see pgListener).
type Store struct {
	pool   *pgxpool.Pool
	listen *pgListener

	mu   sync.Mutex
	self store.Replica // the replica this store acts for; zero before Join
}

// Options configure Open.
type Options struct {
	// DSN is a PostgreSQL connection string: a postgres:// URL or
	// key=value pairs, as libpq takes them. It may hold a password; no
	// error of the store repeats it.
	DSN string
	// MaxConns bounds the pool's connections; DefaultMaxConns
	// when 0. The listening connection is one more.
	MaxConns int
	// StatementTimeout bounds every statement on the pool's connections
	// (PostgreSQL's statement_timeout), and connecting when the DSN sets
	// no connect_timeout; DefaultStatementTimeout when 0.
	StatementTimeout time.Duration
}

// Defaults of Options (and of the postgres: settings).
const (
	// DefaultMaxConns is small: a gateway's writes are batched
	// per turn, and a database serves a handful of replicas.
	DefaultMaxConns = 8
	// DefaultStatementTimeout is far above any statement of the
	// store (milliseconds), and well below a client's patience.
	DefaultStatementTimeout = 5 * time.Second
)

// notifyChannel is the one channel every journal write notifies, with the
// turn's id as payload.
const notifyChannel = "acpgate_turns"

var (
	_ store.Store    = (*Store)(nil)
	_ store.Cluster  = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// Open connects to the database opts.DSN names, brings its schema
// up to date (see migrate) and starts listening for the turns'
// notifications. ctx bounds the connecting and the migrations.
func Open(ctx context.Context, opts Options) (_ *Store, err error) {
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		// pgx's message quotes the DSN with the password masked as best
		// it can; a malformed DSN is where that can fail, so it is not
		// repeated at all.
		return nil, errors.New("postgres store: the dsn is not a PostgreSQL connection string (a postgres:// URL or key=value pairs)")
	}
	maxConns := opts.MaxConns
	if maxConns == 0 {
		maxConns = DefaultMaxConns
	}
	if maxConns < 0 || maxConns > 1<<15 {
		return nil, fmt.Errorf("postgres store: max conns %d is out of range", maxConns)
	}
	timeout := opts.StatementTimeout
	if timeout == 0 {
		timeout = DefaultStatementTimeout
	}
	if timeout < time.Millisecond {
		return nil, fmt.Errorf("postgres store: statement timeout %s is below a millisecond", timeout)
	}
	cfg.MaxConns = int32(maxConns)
	setRuntimeParams(cfg.ConnConfig, "acpgate", timeout)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without connect_timeout in the DSN, a connection to a database
		// that does not answer (a partition drops the packets) would wait
		// as long as the call's context, which for the gateway's own
		// writes has no deadline: it fails within a statement's bound.
		cfg.ConnConfig.ConnectTimeout = timeout
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	p := &Store{pool: pool}
	defer func() {
		if err != nil {
			p.pool.Close()
		}
	}()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("postgres store: connecting: %w", err)
	}
	if err := migrate(ctx, cfg.ConnConfig); err != nil {
		return nil, fmt.Errorf("postgres store: migrating the schema: %w", err)
	}
	listenCfg := cfg.ConnConfig.Copy()
	listenCfg.RuntimeParams["application_name"] = listenerName
	if p.listen, err = startListener(ctx, listenCfg); err != nil {
		return nil, fmt.Errorf("postgres store: listening for notifications: %w", err)
	}
	return p, nil
}

// setRuntimeParams names the connections in pg_stat_activity and sets
// their statement_timeout.
func setRuntimeParams(c *pgx.ConnConfig, name string, timeout time.Duration) {
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	c.RuntimeParams["application_name"] = name
	c.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
}

// Close stops listening, wakes every reader still subscribed (they find
// the store closed when they read), and closes the pool.
func (p *Store) Close() error {
	p.listen.close()
	p.pool.Close()
	return nil
}

// opError gives err the store's context. The store's own sentinels go
// through as they are: callers compare them with errors.Is, and they say
// what happened without more. A failure to reach the database is marked
// ErrUnavailable.
func opError(op string, err error) error {
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrEnded) {
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("postgres store: %s: %w (retry once it is back): %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres store: %s: %w", op, err)
}

// unreachable reports whether err is the database being out of reach
// rather than refusing the statement: no connection, a connection lost,
// a server shutting down or starting up, a timeout.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: the server is
		// shutting down, crashed, or not yet accepting connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// inTx runs f in a transaction and commits it; errors get op.
func (p *Store) inTx(ctx context.Context, op string, f func(pgx.Tx) error) error {
	return opError(op, pgx.BeginFunc(ctx, p.pool, f))
}
