package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/postgres"
	"github.com/acpgate/acpgate/internal/store/storetest"
	"github.com/acpgate/acpgate/internal/testpg"
)

func TestPostgresPassesTheSharedSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openPostgres(t, testpg.Start(t)) })
}

// openPostgres opens a store on dsn, closed when t ends.
func openPostgres(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	return openPostgresWith(t, postgres.Options{DSN: dsn})
}

func openPostgresWith(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	p, err := postgres.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// rawConn is a connection of the test's own to the store's database, to
// look at or tamper with what the store wrote.
func rawConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitClosed waits, up to a bound, for ch to be closed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not woken within 10s", what)
	}
}

// assertOpen checks that ch is not closed (yet).
func assertOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: woken, but nothing changed", what)
	default:
	}
}

func TestReplicasStartingTogetherOnAnEmptyDatabaseCreateOneSchema(t *testing.T) {
	dsn := testpg.Start(t)
	const n = 6
	errs := make([]error, n)
	stores := make([]*postgres.Store, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = postgres.Open(context.Background(), postgres.Options{DSN: dsn})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	var applied, turnsTables int
	conn := rawConn(t, dsn)
	if err := conn.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM acpgate_schema_versions WHERE version_id > 0),
		(SELECT count(*) FROM pg_tables WHERE tablename = 'turns')`).Scan(&applied, &turnsTables); err != nil {
		t.Fatal(err)
	}
	migrations, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(migrations) == 0 {
		t.Fatalf("the migrations: %v, %v", migrations, err)
	}
	if applied != len(migrations) || turnsTables != 1 {
		t.Errorf("after %d concurrent opens: %d versions recorded and %d turns tables, want %d and 1", n, applied, turnsTables, len(migrations))
	}
	// Every store works on the one schema.
	for i, s := range stores {
		if s == nil {
			continue
		}
		if _, created, err := s.Begin(context.Background(), storetest.NewTurn(fmt.Sprintf("t%d", i), "", 1, i)); err != nil || !created {
			t.Errorf("Begin on store %d: created %v, %v", i, created, err)
		}
	}
}

func TestADatabaseWithANewerSchemaIsRefused(t *testing.T) {
	dsn := testpg.Start(t)
	openPostgres(t, dsn)
	if _, err := rawConn(t, dsn).Exec(context.Background(), `INSERT INTO acpgate_schema_versions (version_id, is_applied) VALUES (9999, true)`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open on a schema of version 9999: %v, want a refusal naming it newer", err)
	}
}

func TestErrorsOfTheStoreNeverRepeatTheDSNsPassword(t *testing.T) {
	const password = "s3cret-Pa55word"
	for name, dsn := range map[string]string{
		"no server there":   "postgres://acpgate:" + password + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"a malformed URL":   "postgres://acpgate:" + password + "@127.0.0.1:notaport/db",
		"malformed pairs":   "host=127.0.0.1 password=" + password + " port='1",
		"an unknown option": "postgres://acpgate:" + password + "@127.0.0.1:1/db?sslmode=sometimes",
	} {
		_, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("%s: the error repeats the password: %v", name, err)
		}
		if !strings.HasPrefix(err.Error(), "postgres store: ") {
			t.Errorf("%s: the error does not say whose it is: %v", name, err)
		}
	}
}

func TestAStatementThatWaitsPastTheStatementTimeoutFails(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	s := openPostgresWith(t, postgres.Options{DSN: dsn, StatementTimeout: 200 * time.Millisecond})
	if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	// Another client holds the turn's row, as a stuck one would.
	tx, err := rawConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM turns WHERE id = 't1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = s.Started(bounded, "t1", "s1", storetest.Events(1, 1)[0])
	if err == nil || !strings.Contains(err.Error(), "statement timeout") || bounded.Err() != nil {
		t.Fatalf("Started on a row held elsewhere: %v (context: %v), want the statement timeout's error", err, bounded.Err())
	}
}

func TestThePoolNeverOpensMoreThanMaxConns(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	s := openPostgresWith(t, postgres.Options{DSN: dsn, MaxConns: 2})
	conn := rawConn(t, dsn)
	if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 20 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Get(ctx, "t1"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	most := 0
	for range 50 {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'acpgate'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
	}
	close(stop)
	wg.Wait()
	if most == 0 || most > 2 {
		t.Errorf("the pool had up to %d connections under 20 readers, want 1 or 2 (MaxConns)", most)
	}
}

func TestTwoStoresBeginningOneRequestIDAtOnceStartOneTurn(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	stores := []*postgres.Store{openPostgres(t, dsn), openPostgres(t, dsn)}
	storetest.OneBeginWins(t, 60, func(i int) store.Store { return stores[i%2] })
	var turns int
	if err := rawConn(t, dsn).QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns); err != nil || turns != 1 {
		t.Errorf("%d turns in the database (%v), want 1", turns, err)
	}
}

func TestDeletingEndedTurnsPurgesTheirEventsEvenPastACrash(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	s := openPostgres(t, dsn)
	conn := rawConn(t, dsn)
	// "long" has more events than one purge statement deletes.
	const long = 25_000
	for id, n := range map[string]uint64{"long": long, "short": 9, "kept": 9} {
		if _, _, err := s.Begin(ctx, storetest.NewTurn(id, "", 1, 0)); err != nil {
			t.Fatal(err)
		}
		if err := s.Started(ctx, id, "s1", storetest.Events(1, 1)[0]); err != nil {
			t.Fatal(err)
		}
		for from := uint64(2); from <= n; from += 1000 {
			if err := s.Append(ctx, id, storetest.Events(from, min(from+999, n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A crash after "short" was deleted and before its events were:
	// its record is gone, its events wait in the table.
	if _, err := conn.Exec(ctx, `DELETE FROM turns WHERE id = 'short'; INSERT INTO deleted_journals VALUES ('short')`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(ctx, "short", 0, 10, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Events of a deleted turn whose events are not purged yet: %v, want ErrNotFound", err)
	}
	if err := s.End(ctx, "long", nil, store.Event{Seq: long + 1, Data: []byte("end")}, time.Unix(0, 1)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteEnded(ctx, time.Unix(0, 2)); err != nil || n != 1 {
		t.Fatalf("DeleteEnded = %d, %v; want 1", n, err)
	}
	rows := map[string]int{}
	r, err := conn.Query(ctx, `SELECT turn_id, count(*) FROM events GROUP BY turn_id`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var id string
		var n int
		if err := r.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		rows[id] = n
	}
	if len(rows) != 1 || rows["kept"] != 9 {
		t.Errorf("event rows by turn after DeleteEnded = %v, want only kept's 9", rows)
	}
	var waiting int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM deleted_journals`).Scan(&waiting); err != nil || waiting != 0 {
		t.Errorf("%d journals still wait to be purged (%v), want none", waiting, err)
	}
}

func TestAWriteOnOneStoreWakesAReaderOfAnotherWithoutPolling(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	writer, reader := openPostgres(t, dsn), openPostgres(t, dsn)
	if _, _, err := writer.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := writer.Begin(ctx, storetest.NewTurn("other", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		write func() error
	}{
		{"Started", func() error { return writer.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]) }},
		{"Append", func() error { return writer.Append(ctx, "t1", storetest.Events(2, 3)) }},
		{"End", func() error {
			return writer.End(ctx, "t1", nil, store.Event{Seq: 4, Data: []byte("end")}, time.Unix(0, 1))
		}},
	}
	for _, step := range steps {
		changed, stop := reader.Changed(ctx, "t1")
		unrelated, stopUnrelated := reader.Changed(ctx, "other")
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		waitClosed(t, changed, step.name)
		assertOpen(t, unrelated, step.name+" of another turn")
		stop()
		stopUnrelated()
	}
	// A refused write commits nothing, and so notifies nothing.
	changed, stop := reader.Changed(ctx, "t1")
	defer stop()
	if err := writer.Append(ctx, "t1", storetest.Events(5, 5)); !errors.Is(err, store.ErrEnded) {
		t.Fatalf("Append after End: %v, want ErrEnded", err)
	}
	if err := writer.Append(ctx, "other", storetest.Events(1, 1)); err != nil {
		t.Fatal(err)
	}
	// The notification of other's append comes after any of t1's
	// would have: once a reader of other is woken, t1's has been seen.
	otherWoken, stopOther := reader.Changed(ctx, "other")
	defer stopOther()
	if err := writer.Append(ctx, "other", storetest.Events(2, 2)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, otherWoken, "Append to other")
	assertOpen(t, changed, "a refused Append")
}

func TestALostListenerConnectionWakesEveryReaderAndListensAgain(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	writer, reader := openPostgres(t, dsn), openPostgres(t, dsn)
	if _, _, err := writer.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	// Both stores listen once the first notification reaches them.
	first, stop := reader.Changed(ctx, "t1")
	if err := writer.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, first, "Started")
	stop()

	changed, stop := reader.Changed(ctx, "t1")
	defer stop()
	var killed int
	if err := rawConn(t, dsn).QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'acpgate-listener'`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Fatalf("terminated %d listening connections, want the two stores'", killed)
	}
	waitClosed(t, changed, "a lost listening connection")

	// And it listens again: a later write wakes a new subscriber.
	deadline := time.Now().Add(10 * time.Second)
	for seq := uint64(2); ; seq++ {
		again, stop := reader.Changed(ctx, "t1")
		if err := writer.Append(ctx, "t1", storetest.Events(seq, seq)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-again:
		case <-time.After(time.Until(deadline)):
			t.Fatal("no wake within 10s of the connection's loss")
		}
		stop()
		var listening int
		if err := rawConn(t, dsn).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'acpgate-listener'`).Scan(&listening); err != nil {
			t.Fatal(err)
		}
		if listening == 2 {
			// A subscription made now is covered by LISTEN.
			covered, stop := reader.Changed(ctx, "t1")
			defer stop()
			if err := writer.Append(ctx, "t1", storetest.Events(seq+1, seq+1)); err != nil {
				t.Fatal(err)
			}
			waitClosed(t, covered, "an Append after listening again")
			return
		}
	}
}

func TestClosingTheStoreWakesItsReaders(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Options{DSN: testpg.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	changed, stop := s.Changed(ctx, "t1")
	defer stop()
	s.Close()
	waitClosed(t, changed, "Close")
	after, stop := s.Changed(ctx, "t1")
	defer stop()
	waitClosed(t, after, "a subscription after Close")
}
