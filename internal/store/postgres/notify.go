package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgListener is the PostgreSQL store's Notifier: one connection of its
// own LISTENs on notifyChannel, to which every journal write sends the
// turn's id in its transaction, and wakes the readers subscribed to that
// turn. One connection per store, whatever the number of readers: a
// LISTEN per reader would cost a connection each.
//
// A notification can be lost only while the connection is down. So when
// the connection is established again and LISTENing, every reader is
// woken: each re-reads the store, which has everything committed by then,
// and subscribes again. Reconnecting backs off from listenRetryMin to
// listenRetryMax, so that a database that is down is not hammered.
type pgListener struct {
	cfg    *pgx.ConnConfig
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	subs   map[string]map[*pgSub]struct{}
	closed bool
}

// pgSub is one reader's subscription to one turn.
type pgSub struct {
	ch   chan struct{}
	once sync.Once
}

func (s *pgSub) wake() { s.once.Do(func() { close(s.ch) }) }

// listenerName is the listening connection's application_name, so that
// it can be told apart in pg_stat_activity (and a test can cut it).
const listenerName = "acpgate-listener"

const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = 5 * time.Second
	// listenCloseTimeout bounds closing the connection when the store
	// closes or the connection failed.
	listenCloseTimeout = time.Second
)

// startListener connects and LISTENs, within ctx, and then starts the
// listening goroutine, which runs until close. Listening before the store
// is handed out means a reader never misses a write made after Open
// returned, and is never woken for nothing by the first connection.
func startListener(ctx context.Context, cfg *pgx.ConnConfig) (*pgListener, error) {
	conn, err := listenOn(ctx, cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l := &pgListener{cfg: cfg, cancel: cancel, done: make(chan struct{}), subs: map[string]map[*pgSub]struct{}{}}
	go l.run(runCtx, conn)
	return l, nil
}

// listenOn opens a connection that LISTENs on notifyChannel.
func listenOn(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// closeConn closes conn within listenCloseTimeout.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), listenCloseTimeout)
	defer cancel()
	conn.Close(ctx)
}

// Changed subscribes to turnID. ctx is not used: a subscription ends by
// stop, by a wake, or when the store closes.
func (p *Store) Changed(_ context.Context, turnID string) (<-chan struct{}, func()) {
	return p.listen.subscribe(turnID)
}

func (l *pgListener) subscribe(turnID string) (<-chan struct{}, func()) {
	s := &pgSub{ch: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		s.wake()
		return s.ch, func() {}
	}
	if l.subs[turnID] == nil {
		l.subs[turnID] = map[*pgSub]struct{}{}
	}
	l.subs[turnID][s] = struct{}{}
	return s.ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs[turnID], s)
		if len(l.subs[turnID]) == 0 {
			delete(l.subs, turnID)
		}
	}
}

// wake wakes the readers of turnID; wakeAll every reader. A woken
// subscription is dropped: its reader subscribes again before it reads.
func (l *pgListener) wake(turnID string) {
	l.mu.Lock()
	subs := l.subs[turnID]
	delete(l.subs, turnID)
	l.mu.Unlock()
	for s := range subs {
		s.wake()
	}
}

func (l *pgListener) wakeAll() {
	l.mu.Lock()
	all := l.subs
	l.subs = map[string]map[*pgSub]struct{}{}
	l.mu.Unlock()
	for _, subs := range all {
		for s := range subs {
			s.wake()
		}
	}
}

// run receives on conn until it fails, then connects again, backing off,
// until ctx ends.
func (l *pgListener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := listenRetryMin
	for {
		if conn != nil {
			l.receive(ctx, conn)
			closeConn(conn)
			backoff = listenRetryMin
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		var err error
		if conn, err = listenOn(ctx, l.cfg); err != nil {
			conn = nil
			backoff = min(2*backoff, listenRetryMax)
			continue
		}
		// Listening again: whatever was written while the connection
		// was down, readers find by reading.
		l.wakeAll()
	}
}

// receive wakes the readers of each notified turn until conn fails or
// ctx ends.
func (l *pgListener) receive(ctx context.Context, conn *pgx.Conn) {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		l.wake(n.Payload)
	}
}

// close stops the goroutine, waits for it, and wakes every reader; later
// subscriptions are woken at once.
func (l *pgListener) close() {
	l.cancel()
	<-l.done
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wakeAll()
}
