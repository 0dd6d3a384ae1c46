package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/postgres"
	"github.com/acpgate/acpgate/internal/store/storetest"
	"github.com/acpgate/acpgate/internal/testpg"
)

// Leases in these tests: short ones expire while the test waits (by the
// database's clock, polled with a bound), long ones never do.
const (
	shortLease = time.Second
	longLease  = time.Hour
)

// lostTerminal is the terminal a reaper gives a lost replica's turn.
func lostTerminal(t store.Turn) store.Event {
	return store.Event{Seq: t.StoppedSeq(), Data: []byte("gateway stopped: " + t.ID)}
}

func join(t *testing.T, s *postgres.Store, id string, ttl time.Duration) store.Replica {
	t.Helper()
	r, err := s.Join(context.Background(), store.Replica{ID: id, Address: id + ":7070", Sessions: 1, RunningTurns: 2, MaxSessions: 3}, ttl)
	if err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
	return r
}

// waitExpired waits, up to 10s, until r's lease is no longer listed as
// live by s.
func waitExpired(t *testing.T, s *postgres.Store, r store.Replica) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		live, err := s.Replicas(context.Background())
		if err != nil {
			t.Fatalf("Replicas: %v", err)
		}
		if !slices.ContainsFunc(live, func(x store.Replica) bool { return x.Epoch == r.Epoch }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease of %s (epoch %d) is still live 10s after it should have expired", r.ID, r.Epoch)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// beginStarted begins turn id on s and journals its start.
func beginStarted(t *testing.T, s store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	if _, created, err := s.Begin(ctx, storetest.NewTurn(id, "r-"+id, 1, 0)); err != nil || !created {
		t.Fatalf("Begin(%s): created %v, %v", id, created, err)
	}
	if err := s.Started(ctx, id, "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatalf("Started(%s): %v", id, err)
	}
}

func replicaIDs(rs []store.Replica) []string {
	return idsOf(rs, func(r store.Replica) string { return r.ID })
}

func turnIDsOf(turns []store.Turn) []string {
	return idsOf(turns, func(t store.Turn) string { return t.ID })
}

func idsOf[T any](xs []T, id func(T) string) []string {
	var ids []string
	for _, x := range xs {
		ids = append(ids, id(x))
	}
	return ids
}

// twoReplicas opens two stores on a new database and joins them as a,
// with a lease of aLease, and b, whose lease does not expire.
func twoReplicas(t *testing.T, aLease time.Duration) (a, b *postgres.Store, ra store.Replica, dsn string) {
	t.Helper()
	dsn = testpg.Start(t)
	a, b = openPostgres(t, dsn), openPostgres(t, dsn)
	ra = join(t, a, "a", aLease)
	join(t, b, "b", longLease)
	return a, b, ra, dsn
}

func TestJoinMintsAGreaterEpochEachTimeAndReplicasListsTheLiveLeases(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	if self := a.Self(); self.Epoch != 0 || self.ID != "" {
		t.Fatalf("Self before Join = %+v, want the zero Replica", self)
	}
	ra := join(t, a, "a", longLease)
	rb := join(t, b, "b", longLease)
	if ra.Epoch <= 0 || rb.Epoch <= ra.Epoch {
		t.Fatalf("epochs %d then %d, want positive and increasing", ra.Epoch, rb.Epoch)
	}
	if a.Self() != ra {
		t.Errorf("Self = %+v, want %+v", a.Self(), ra)
	}
	if ra.Address != "a:7070" || ra.Sessions != 1 || ra.RunningTurns != 2 || ra.MaxSessions != 3 || time.Until(ra.ExpiresAt) < longLease-time.Minute {
		t.Errorf("Join recorded %+v", ra)
	}
	if err := a.Renew(ctx, 5, 6, longLease); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	live, err := b.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(replicaIDs(live), []string{"a", "b"}) {
		t.Fatalf("Replicas = %v, want [a b]", replicaIDs(live))
	}
	if live[0].Sessions != 5 || live[0].RunningTurns != 6 || live[0].Epoch != ra.Epoch {
		t.Errorf("after Renew(5, 6): %+v", live[0])
	}
}

func TestALeaseThatIsNotRenewedExpiresAndCannotBeRenewed(t *testing.T) {
	ctx := context.Background()
	a, b, ra, _ := twoReplicas(t, shortLease)
	waitExpired(t, b, ra)
	if err := a.Renew(ctx, 0, 0, shortLease); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew of an expired lease: %v, want ErrLeaseLost", err)
	}
	// A new Join is a new lease, with a new epoch.
	again := join(t, a, "a", longLease)
	if again.Epoch <= ra.Epoch {
		t.Errorf("epoch of the new Join %d, want more than %d", again.Epoch, ra.Epoch)
	}
	if err := a.Renew(ctx, 0, 0, longLease); err != nil {
		t.Errorf("Renew of the new lease: %v", err)
	}
}

func TestRenewBeforeJoinIsALostLease(t *testing.T) {
	s := openPostgres(t, testpg.Start(t))
	if err := s.Renew(context.Background(), 0, 0, longLease); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew before Join: %v, want ErrLeaseLost", err)
	}
}

func TestARestartedReplicaSupersedesItsFormerLease(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	old, restarted := openPostgres(t, dsn), openPostgres(t, dsn)
	join(t, old, "a", longLease)
	beginStarted(t, old, "t1")
	join(t, restarted, "a", longLease)
	if err := old.Renew(ctx, 0, 0, longLease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew of the superseded lease: %v, want ErrLeaseLost", err)
	}
	if err := old.Append(ctx, "t1", storetest.Events(2, 2)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Append by the superseded lease: %v, want ErrFenced", err)
	}
	// Its turns are reaped at once, not when the lease would have ended.
	reaped, ended, err := restarted.Reap(ctx, lostTerminal)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].ID != "a" || len(ended) != 1 || ended[0].ID != "t1" {
		t.Errorf("Reap = %v, %v; want the former a and its turn t1", replicaIDs(reaped), ended)
	}
	live, _ := restarted.Replicas(ctx)
	if len(live) != 1 || live[0].Epoch != restarted.Self().Epoch {
		t.Errorf("Replicas = %+v, want only the restarted lease", live)
	}
}

func TestTurnsAreStampedWithTheirReplicaAndFencedWhenItsLeaseExpires(t *testing.T) {
	ctx := context.Background()
	a, b, ra, _ := twoReplicas(t, shortLease)
	beginStarted(t, a, "t1")
	if got, err := b.Get(ctx, "t1"); err != nil || got.Replica != "a" {
		t.Fatalf("Get: replica %q, %v; want a", got.Replica, err)
	}
	// Another replica does not write a's turn.
	if err := b.Append(ctx, "t1", storetest.Events(2, 2)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Append by another replica: %v, want ErrFenced", err)
	}
	if err := b.End(ctx, "t1", nil, store.Event{Seq: 2, Data: []byte("x")}, time.Now()); !errors.Is(err, store.ErrFenced) {
		t.Errorf("End by another replica: %v, want ErrFenced", err)
	}
	waitExpired(t, b, ra)
	// Expired but not yet reaped: a writes nothing more.
	for name, err := range map[string]error{
		"Append":          a.Append(ctx, "t1", storetest.Events(2, 2)),
		"an empty Append": a.Append(ctx, "t1", nil),
		"End":             a.End(ctx, "t1", nil, store.Event{Seq: 2, Data: []byte("x")}, time.Now()),
	} {
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s on an expired lease: %v, want ErrFenced", name, err)
		}
	}
	if _, _, err := a.Begin(ctx, storetest.NewTurn("t2", "", 1, 1)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Begin on an expired lease: %v, want ErrFenced", err)
	}
	if _, err := b.Get(ctx, "t2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the fenced Begin recorded a turn: %v", err)
	}
	// Once reaped, the turn has ended: that is what a late write learns.
	if _, _, err := b.Reap(ctx, lostTerminal); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, "t1", storetest.Events(2, 2)); !errors.Is(err, store.ErrEnded) {
		t.Errorf("Append after the reap: %v, want ErrEnded", err)
	}
	if err := a.Started(ctx, "t1", "s2", storetest.Events(2, 2)[0]); !errors.Is(err, store.ErrEnded) {
		t.Errorf("Started after the reap: %v, want ErrEnded", err)
	}
}

func TestReapEndsALostReplicasTurnsReleasesItsSessionsAndWakesReaders(t *testing.T) {
	ctx := context.Background()
	a, b, ra, _ := twoReplicas(t, shortLease)
	beginStarted(t, a, "t1")
	if err := a.Append(ctx, "t1", storetest.Events(2, 4)); err != nil {
		t.Fatal(err)
	}
	beginStarted(t, a, "t2")
	beginStarted(t, a, "done")
	if err := a.End(ctx, "done", nil, store.Event{Seq: 2, Data: []byte("ok")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	beginStarted(t, b, "b's")
	for _, id := range []string{"s1", "s2"} {
		if err := a.PutSession(ctx, storetest.NewSession(id, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutSession(ctx, storetest.NewSession("s3", 1)); err != nil {
		t.Fatal(err)
	}
	woken, stop := b.Changed(ctx, "t1")
	defer stop()

	if reaped, ended, err := b.Reap(ctx, lostTerminal); err != nil || len(reaped) != 0 || len(ended) != 0 {
		t.Fatalf("Reap while every lease is live = %v, %v, %v; want nothing", reaped, ended, err)
	}
	waitExpired(t, b, ra)
	reaped, ended, err := b.Reap(ctx, lostTerminal)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].Epoch != ra.Epoch {
		t.Fatalf("reaped %+v, want a's lease", reaped)
	}
	slices.SortFunc(ended, func(x, y store.Turn) int { return bytes.Compare([]byte(x.ID), []byte(y.ID)) })
	if ids := turnIDsOf(ended); !slices.Equal(ids, []string{"t1", "t2"}) {
		t.Fatalf("ended %v, want the running [t1 t2]", ids)
	}
	for _, e := range ended {
		got, err := b.Get(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := lostTerminal(store.Turn{ID: e.ID, LastSeq: got.LastSeq - 1})
		if got.Running() || got.LastSeq != e.LastSeq || !bytes.Equal(got.Terminal, want.Data) || !got.EndedAt.Equal(e.EndedAt) {
			t.Errorf("%s after the reap: running %v, last seq %d, terminal %q; returned %+v", e.ID, got.Running(), got.LastSeq, got.Terminal, e)
		}
		events, err := b.Events(ctx, e.ID, got.LastSeq-1, 10, 0)
		if err != nil || len(events) != 1 || events[0].Seq != got.LastSeq || !bytes.Equal(events[0].Data, want.Data) {
			t.Errorf("%s's journal ends with %+v, %v; want the terminal", e.ID, events, err)
		}
	}
	if got, want := mustGet(t, b, "t1").LastSeq, (store.Turn{LastSeq: 4, Reserved: 4 + store.ReserveAhead}).StoppedSeq(); got != want {
		t.Errorf("t1's terminal has seq %d, want %d (above the seqs its 4 events reserved)", got, want)
	}
	if events, err := b.Events(ctx, "t1", 3, 10, 0); err != nil || len(events) != 2 || events[0].Seq != 4 || events[1].Seq <= 4+store.ReserveAhead {
		t.Errorf("t1's journal after seq 3 = %+v, %v; want seq 4, then the terminal above the reservation", events, err)
	}
	if got, _ := b.Get(ctx, "b's"); !got.Running() {
		t.Error("the live replica's turn was ended")
	}
	waitClosed(t, woken, "a reaped turn's reader")

	sessions, err := b.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, s := range sessions {
		owners[s.ID] = s.Replica
	}
	if want := map[string]string{"s1": "", "s2": "", "s3": "b"}; fmt.Sprint(owners) != fmt.Sprint(want) {
		t.Errorf("session owners after the reap = %v, want %v", owners, want)
	}
	if reaped, ended, err := b.Reap(ctx, lostTerminal); err != nil || len(reaped) != 0 || len(ended) != 0 {
		t.Errorf("a second Reap = %v, %v, %v; want nothing", reaped, ended, err)
	}
}

func TestTwoReapersAtOnceReapEachLeaseOnce(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	var lost []store.Replica
	for i := range 4 {
		s := openPostgres(t, dsn)
		lost = append(lost, join(t, s, fmt.Sprintf("lost%d", i), shortLease))
		for j := range 3 {
			beginStarted(t, s, fmt.Sprintf("t%d-%d", i, j))
		}
	}
	reapers := []*postgres.Store{openPostgres(t, dsn), openPostgres(t, dsn)}
	for i, r := range reapers {
		join(t, r, fmt.Sprintf("reaper%d", i), longLease)
	}
	for _, r := range lost {
		waitExpired(t, reapers[0], r)
	}
	var mu sync.Mutex
	reapedBy := map[int64]int{}
	endedBy := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			<-start
			reaped, ended, err := reapers[i%2].Reap(ctx, lostTerminal)
			if err != nil {
				t.Errorf("Reap: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range reaped {
				reapedBy[r.Epoch]++
			}
			for _, e := range ended {
				endedBy[e.ID]++
			}
		})
	}
	close(start)
	wg.Wait()
	for _, r := range lost {
		if reapedBy[r.Epoch] != 1 {
			t.Errorf("%s was reaped %d times, want once", r.ID, reapedBy[r.Epoch])
		}
	}
	if len(endedBy) != 12 {
		t.Errorf("%d turns ended, want 12", len(endedBy))
	}
	for id, n := range endedBy {
		if n != 1 {
			t.Errorf("turn %s ended %d times", id, n)
		}
	}
}

func TestALeftReplicaIsNotReapedAndItsSessionsAreReleased(t *testing.T) {
	ctx := context.Background()
	a, b, _, _ := twoReplicas(t, longLease)
	beginStarted(t, a, "t1")
	if err := a.End(ctx, "t1", nil, store.Event{Seq: 2, Data: []byte("ok")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.PutSession(ctx, storetest.NewSession("s1", 0)); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if live, _ := b.Replicas(ctx); !slices.Equal(replicaIDs(live), []string{"b"}) {
		t.Errorf("Replicas after a's Leave = %v, want [b]", replicaIDs(live))
	}
	if reaped, _, err := b.Reap(ctx, lostTerminal); err != nil || len(reaped) != 0 {
		t.Errorf("Reap after a clean Leave = %v, %v; want nothing", reaped, err)
	}
	if sessions, _ := b.Sessions(ctx); len(sessions) != 1 || sessions[0].Replica != "" {
		t.Errorf("sessions after Leave = %+v, want s1 released", sessions)
	}
	if err := a.Renew(ctx, 0, 0, longLease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew after Leave: %v, want ErrLeaseLost", err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Errorf("a second Leave: %v", err)
	}
}

func TestALeaveWithTurnsStillRunningLeavesThemToTheReaper(t *testing.T) {
	ctx := context.Background()
	a, b, _, _ := twoReplicas(t, longLease)
	beginStarted(t, a, "t1")
	if err := a.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := a.Append(ctx, "t1", storetest.Events(2, 2)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Append after Leave: %v, want ErrFenced", err)
	}
	reaped, ended, err := b.Reap(ctx, lostTerminal)
	if err != nil || len(reaped) != 1 || len(ended) != 1 || ended[0].ID != "t1" {
		t.Errorf("Reap after a Leave with t1 running = %v, %v, %v; want a and t1", replicaIDs(reaped), turnIDsOf(ended), err)
	}
}

func TestClaimSessionTakesOverOnlyASessionWhoseOwnerIsGone(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	a, b, c := openPostgres(t, dsn), openPostgres(t, dsn), openPostgres(t, dsn)
	if _, _, err := b.ClaimSession(ctx, "s1"); !errors.Is(err, store.ErrFenced) {
		t.Errorf("ClaimSession before Join: %v, want ErrFenced", err)
	}
	ra := join(t, a, "a", shortLease)
	join(t, b, "b", longLease)
	join(t, c, "c", longLease)
	if err := a.PutSession(ctx, storetest.NewSession("s1", 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ClaimSession(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ClaimSession of no session: %v, want ErrNotFound", err)
	}
	if s, ok, err := b.ClaimSession(ctx, "s1"); err != nil || ok || s.Replica != "a" {
		t.Errorf("ClaimSession of a live replica's session = %+v, %v, %v; want a's record, false", s, ok, err)
	}
	if err := b.PutSession(ctx, storetest.NewSession("s1", 0)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("PutSession of a live replica's session: %v, want ErrFenced", err)
	}
	if err := b.DeleteSession(ctx, "s1"); !errors.Is(err, store.ErrFenced) {
		t.Errorf("DeleteSession of a live replica's session: %v, want ErrFenced", err)
	}
	waitExpired(t, b, ra)
	// b and c claim at once: one gets it.
	type claim struct {
		s   store.Session
		ok  bool
		err error
	}
	claims := make([]claim, 2)
	var wg sync.WaitGroup
	for i, s := range []*postgres.Store{b, c} {
		wg.Go(func() {
			got, ok, err := s.ClaimSession(ctx, "s1")
			claims[i] = claim{got, ok, err}
		})
	}
	wg.Wait()
	winners := 0
	for i, cl := range claims {
		if cl.err != nil {
			t.Fatalf("claim %d: %v", i, cl.err)
		}
		if cl.ok {
			winners++
			if want := []string{"b", "c"}[i]; cl.s.Replica != want {
				t.Errorf("claim %d won with the record of %q, want %q", i, cl.s.Replica, want)
			}
		}
	}
	if winners != 1 {
		t.Fatalf("%d claims of one session succeeded, want 1", winners)
	}
	if err := a.PutSession(ctx, storetest.NewSession("s1", 0)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("PutSession by the expired former owner: %v, want ErrFenced", err)
	}
	sessions, _ := b.Sessions(ctx)
	if len(sessions) != 1 || (sessions[0].Replica != "b" && sessions[0].Replica != "c") {
		t.Errorf("Sessions = %+v, want s1 owned by the winner", sessions)
	}
}

func TestPutSessionStampsTheReplicaWhateverTheCallerGave(t *testing.T) {
	ctx := context.Background()
	s := openPostgres(t, testpg.Start(t))
	join(t, s, "a", longLease)
	rec := storetest.NewSession("s1", 0)
	rec.Replica = "someone else"
	if err := s.PutSession(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Replica = "a"
	got, err := s.Sessions(ctx)
	if err != nil || len(got) != 1 || got[0].Replica != "a" {
		t.Fatalf("Sessions = %+v, %v; want s1 owned by a", got, err)
	}
	// Its owner may change it, and delete it.
	rec.Mode = "ask"
	if err := s.PutSession(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Sessions(ctx); len(got) != 0 {
		t.Errorf("Sessions after DeleteSession = %+v", got)
	}
}

func TestReapDeletesTheRecordsOfLeasesThatEndedMoreThanADayAgo(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.Start(t)
	a, b, c := openPostgres(t, dsn), openPostgres(t, dsn), openPostgres(t, dsn)
	join(t, a, "old", longLease)
	join(t, b, "recent", longLease)
	join(t, c, "reaper", longLease)
	for _, s := range []*postgres.Store{a, b} {
		if err := s.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	conn := rawConn(t, dsn)
	if _, err := conn.Exec(ctx, `UPDATE replicas SET left_at = now() - interval '25 hours' WHERE id = 'old'`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Reap(ctx, lostTerminal); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT id FROM replicas ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if !slices.Equal(ids, []string{"reaper", "recent"}) {
		t.Errorf("replica records after Reap = %v, want [reaper recent]", ids)
	}
}

func mustGet(t *testing.T, st store.Store, id string) store.Turn {
	t.Helper()
	got, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}
